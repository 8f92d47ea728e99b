"""Word lists and name generators for the offline task generators.

Lexical variety is what lets a generated pool pass the diversity gate honestly: names, places
and organisations are composed from syllables (an open vocabulary), objects, verbs and frames
come from large lists, and every fact has several paraphrases.
"""

from __future__ import annotations

import random

FIRST_NAMES = """
Aaliyah Abel Ada Adaeze Adrian Agnes Ahmed Aiko Ainhoa Alba Aleksander Alma Amara Amir Anahi Anders Ania Anika
Antoine Anwar Arjun Astrid Aurelio Ayumi Bastian Beatrix Bilal Bjorn Blessing Bodhi Bruna Caetano Calla Camille
Carmen Cassius Chidi Chioma Clara Cosimo Dalia Damaris Darius Dawit Delphine Desmond Dilnoza Dmitri Eamon Ebele
Edda Eitan Elif Elio Eloise Emeka Esme Ezra Fatima Felix Femi Fenna Filipa Florin Freya Gaspard Gideon Greta
Gulnara Habib Hana Hamza Hedda Helio Hugo Idris Ifeoma Ilse Imani Ines Ingrid Isak Ivo Jabari Jana Javier Jin
Joaquim Jonas Juno Kai Kalani Kamala Karim Kasia Kenji Kiri Kofi Lachlan Laila Lars Leilani Lena Leon Liesel
Lior Luca Lucia Magnus Mahala Malik Mara Marek Mateo Matilde Mehmet Mei Mikko Mina Mira Moana Nadia Nalani Naveen
Nia Niamh Nikolai Noor Obi Odile Olamide Omar Orla Oskar Paloma Pavel Pilar Priya Quentin Quilla Rafael Rania
Ravi Reza Rhea Rosa Rui Saanvi Sakura Salome Santiago Selin Seun Signe Silas Sofia Soren Sunita Taini Tamsin
Tariq Teodor Thandiwe Tobias Tomas Uma Ursula Valentina Vera Vikram Wanjiru Wren Xiomara Yara Yusuf Zainab Zara
Zeynep Zoltan Ximena Benedikt Cordelia Eskil Farida Gwendolyn Hiroshi Ilaria Jorunn Kwame Leopold Marisol
""".split()

SYL_ON = "b br c ch d dr f fl g gr h j k kl l m n p pr qu r s sh st t th tr v w z zh".split()
SYL_NU = "a e i o u ae ai ea ia io ou y".split()
SYL_CO = ["", "", "", "n", "r", "l", "s", "th", "m", "nd", "rk", "st", "v", "x", "lt"]
PLACE_SUFFIX = "ford by haven mere wick stead vale holm burg dorf port field moor ton gate crest brook".split()
ORG_KINDS = """library observatory conservatory museum gallery foundry brewery academy seminary orchestra
theatre choir archive almanac gazette press workshop guild cooperative bank clinic hospice lighthouse
aquarium arboretum mill tannery shipyard railway""".split()
PROFESSIONS = """architect botanist cartographer composer chemist engraver geologist glassblower historian
illustrator linguist luthier mapmaker mathematician navigator novelist painter physician poet potter
printer sculptor shipwright surveyor translator weaver astronomer clockmaker bookbinder engineer
photographer playwright violinist zoologist economist pharmacist jurist philosopher""".split()
GENRES = """sonnets maps ballads frescoes treatises atlases etchings operas tapestries ledgers lexicons
almanacs chronicles nocturnes carvings manuscripts""".split()
MATERIALS = "granite limestone brick oak cedar marble slate sandstone basalt timber glass iron".split()
COLORS = "amber azure crimson ochre slate ivory teal umber violet saffron jade copper".split()

# Objects for arithmetic stories: (plural noun, container), a large set so bigrams vary.
OBJECTS = [tuple(x.split(":")) for x in """
apples:crates plums:baskets pears:sacks lemons:bags walnuts:jars marbles:pouches buttons:tins stamps:albums
candles:boxes pencils:packs notebooks:stacks postcards:bundles seashells:buckets acorns:pails beads:strings
cupcakes:trays cookies:tins muffins:trays dumplings:steamers pretzels:bags tomatoes:crates carrots:bunches
eggs:cartons oranges:nets peaches:boxes cherries:punnets figs:baskets dates:boxes almonds:jars olives:jars
bolts:bins screws:packets nails:boxes washers:bags tiles:pallets bricks:pallets planks:stacks shingles:bundles
roses:bouquets tulips:bunches daisies:bunches seedlings:flats bulbs:sacks saplings:rows ferns:pots
books:shelves comics:boxes records:crates cassettes:cases puzzles:cartons dice:bags cards:decks chess_sets:crates
scarves:bins mittens:pairs socks:bundles ribbons:spools buttons:cards patches:folders badges:boards
jars_of_honey:crates loaves:racks bagels:bags croissants:trays tortillas:stacks pies:racks tarts:boxes
fish:nets crabs:traps oysters:sacks clams:buckets shrimp:bags trout:creels herring:barrels sardines:tins
kites:bundles balloons:packs lanterns:crates flags:bundles banners:rolls posters:tubes maps:folders
bottles:cases cans:flats cups:stacks plates:stacks bowls:crates spoons:drawers forks:boxes mugs:cartons
vials:racks test_tubes:racks flasks:crates batteries:packs fuses:cartons bulbs:cartons cables:reels
""".split()]
OBJECTS = [(a.replace("_", " "), b) for a, b in OBJECTS]
ROOMS = """bakery workshop greenhouse garage classroom market stall boathouse pantry warehouse studio
attic cellar orchard library kiosk depot harbour shed barn laboratory canteen festival fair""".split()
ACQUIRE = [("buys", "bought"), ("picks up", "picked up"), ("collects", "collected"), ("receives", "received"),
           ("finds", "found"), ("orders", "ordered"), ("gathers", "gathered"), ("is given", "was given"),
           ("harvests", "harvested"), ("wins", "won"), ("bakes", "baked"), ("makes", "made"),
           ("trades for", "traded for"), ("brings home", "brought home"), ("unpacks", "unpacked")]
RELEASE = [("gives away", "gave away"), ("sells", "sold"), ("donates", "donated"), ("loses", "lost"),
           ("uses", "used"), ("eats", "ate"), ("hands out", "handed out"), ("ships", "shipped"),
           ("lends out", "lent out"), ("discards", "discarded"), ("returns", "returned"),
           ("trades away", "traded away"), ("packs off", "packed off"), ("breaks", "broke")]
TIME_WORDS = ["on Monday", "on Tuesday", "on Wednesday", "on Thursday", "on Friday", "on Saturday", "on Sunday",
              "in the morning", "after lunch", "that evening", "the next day", "later that week", "at dawn",
              "before noon", "at the weekend", "during the festival", "in spring", "in autumn", "last winter",
              "over the holidays", "at closing time", "on the first day", "on the second day"]

CONNECTORS_EN = ("and", "because", "if", "then", "therefore", "so", "but", "although", "however", "since",
                 "while", "after", "before", "thus", "hence", "unless", "whereas", "meanwhile", "moreover",
                 "also", "or", "when", "once", "until")
CONNECTORS_ZH = ("因此", "从而", "同时", "因为", "所以", "如果", "那么", "但是", "然而", "并且", "而且", "虽然", "于是")
PRONOUNS_EN = ("it", "they", "them", "this", "that", "he", "she", "him", "her", "his", "its", "their", "those",
               "these")


SYLLABLES = [o + n for o in SYL_ON for n in SYL_NU]


def syllable_word(rng: random.Random, n_syl: int | None = None) -> str:
    """An invented proper name: 2-3 syllables and a coda (an open vocabulary, ~10^7 distinct words)."""
    r = rng.random
    n = n_syl or (3 if r() < 0.34 else 2)
    syl = SYLLABLES
    word = "".join(syl[int(r() * len(syl))] for _ in range(n)) + SYL_CO[int(r() * len(SYL_CO))]
    return word.capitalize()


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {syllable_word(rng)}"


def place(rng: random.Random) -> str:
    return syllable_word(rng, rng.choice((1, 2))) + rng.choice(PLACE_SUFFIX)


def country(rng: random.Random) -> str:
    return syllable_word(rng, 2) + rng.choice(("ia", "and", "ovia", "istan", "mark", "ora", "esh"))


def org(rng: random.Random) -> str:
    return f"{syllable_word(rng)} {rng.choice(ORG_KINDS).capitalize()}"


# Phrase-level paraphrases (lower-case phrase -> alternatives), applied by `vary()` to question frames
# and to non-supporting passage sentences, so two items built from one frame rarely share 5-grams.
# A table of wordings: its entries look alike because they are data, not repeated logic.
PARAPHRASES: dict[str, list[str]] = {
    "was founded by": ["was founded by", "was established by", "was set up by", "was started by", "was created by",
                       "owes its founding to", "was begun by"],
    "someone": ["someone", "a person", "an individual", "a certain figure", "somebody"],
    "that person": ["that person", "this founder", "the founder", "that individual", "this figure"],
    "was born in a town": ["was born in a town", "came from a town", "was a native of some town",
                           "grew up in a small town", "was born in some town"],
    "because every town is a town in some country": ["because every town lies in some country",
                                                      "and since each town belongs to a country",
                                                      "given that towns sit inside countries",
                                                      "because towns are part of countries"],
    "which country is it?": ["which country is it?", "what country is that?", "name the country.",
                             "which nation would that be?", "which country does it belong to?"],
    "consider": ["consider", "think about", "take", "start from", "look at"],
    "then think of": ["then think of", "next, find", "after that, locate", "then identify", "then work out"],
    "the town where they were born": ["the town where they were born", "their birthplace", "their home town",
                                      "the town they came from"],
    "which country is that town in?": ["which country is that town in?", "in what country does it lie?",
                                       "what country holds that town?", "which country contains it?"],
    "given that": ["given that", "bearing in mind that", "knowing that", "keeping in mind that"],
    "in which town": ["in which town", "in what town", "in which place", "in what place"],
    "where was": ["where was", "in which town was", "where exactly was"],
    "born": ["born"],
    "was born in": ["was born in", "was born at", "came into the world in", "was a native of",
                    "spent an early childhood in", "was raised in"],
    "was born first": ["was born first", "was born earlier", "came into the world first", "is the elder"],
    "who was born first": ["who was born first", "who was born earlier", "which one was born first",
                           "who is the elder of the two"],
    "name whoever was born first": ["name whoever was born first", "give the name of the elder",
                                    "say who was born earlier", "tell me who came first"],
    "or was it the other way round?": ["or was it the other way round?", "or the reverse?",
                                       "or did it happen the other way?", "or vice versa?"],
    "compare the birth years of": ["compare the birth years of", "look at when they were born:",
                                   "check the birth dates of", "weigh the birth years of"],
    "which of them came first": ["which of them came first", "who was born first", "which one is older",
                                 "who preceded the other"],
    "lives about": ["lives about", "lives roughly", "survives about", "typically lives"],
    "as long as its kind usually does": ["as long as its kind usually does", "a normal span for its kind",
                                         "as long as is typical", "for the usual length of time"],
    "if both hatched on the same day": ["if both hatched on the same day", "if the two were born together",
                                        "supposing they hatched on one day", "if they started life on the same date"],
    "would the": ["would the", "will the", "could the"],
    "still be alive when": ["still be alive when", "outlast the moment when", "be living when",
                            "survive until"],
    "would it die before": ["would it die before", "would it perish before", "would it pass away ahead of"],
    "assuming neither meets an accident": ["assuming neither meets an accident", "barring accidents",
                                           "if nothing unusual happens", "assuming a natural life"],
    "lived from one year to another": ["lived from one year to another", "lived for some decades",
                                       "had a lifespan of some years", "lived a certain span of years"],
    "opened in some year": ["opened in some year", "opened at some point", "first opened in a certain year",
                            "opened its doors one year"],
    "would": ["would", "could"],
    "have been old enough": ["have been old enough", "have been an adult", "have been grown up"],
    "and still alive": ["and still alive", "and yet alive", "while still living"],
    "to walk in on the day it opened": ["to walk in on the day it opened", "to attend its opening",
                                        "to be there on opening day", "to visit on its first day"],
    "had wanted to see": ["had wanted to see", "had hoped to visit", "had planned to see", "had tried to visit"],
    "would that have been possible": ["would that have been possible", "could that have happened",
                                      "was that feasible", "would it have worked"],
    "given the years": ["given the years", "considering the years", "in light of the years"],
    "movers want to carry": ["movers want to carry", "a crew plans to move", "porters need to bring",
                             "some workers must carry"],
    "is the only way in": ["is the only way in", "is the single entrance", "is the one way inside"],
    "so would the crate fit through it": ["so would the crate fit through it", "so will the crate get through",
                                          "so can the crate pass"],
    "without tilting": ["without tilting", "held flat", "kept level", "without turning it"],
    "had to go through": ["had to go through", "had to pass through", "needed to fit through",
                          "were pushed through"],
    "and nothing else blocked the way": ["and nothing else blocked the way", "with nothing in the way",
                                         "and the path were clear", "with a clear path"],
    "would it get through": ["would it get through", "would it fit", "would it make it", "could it pass"],
    "had already been set up when": ["had already been set up when", "had already existed when",
                                     "had already been running when", "had been founded by the time"],
    "began": ["began", "started", "opened", "was founded"],
    "or is the": ["or is the", "or is it the case that the", "or is the"],
    "the older of the two": ["the older of the two", "the older one", "the elder institution"],
    "toured": ["toured", "visited", "went round", "saw"],
    "could they also have toured": ["could they also have toured", "could they also have visited",
                                    "might they also have seen", "would they also have been able to visit"],
    "which was founded in its own year": ["which was founded in its own year", "founded in some other year",
                                          "which has its own founding year"],
    "critics often compare": ["critics often compare", "reviewers liken", "scholars contrast",
                              "commentators compare", "historians set side by side"],
    "with those of": ["with those of", "against those of", "with the work of", "alongside those of"],
    "studied under": ["studied under", "trained with", "was a pupil of", "apprenticed to", "learned from"],
    "and later published": ["and later published", "and afterwards issued", "and went on to publish",
                            "and eventually released"],
    "moved to": ["moved to", "relocated to", "settled in", "went to live in"],
    **{f"where {p} met": [f"where {p} met", f"where {p} befriended", f"where {p} worked with", f"where {p} first saw",
                          "and there corresponded with", "and there quarrelled with", "meeting there"]
       for p in ("he", "she")},
    "was elected to": ["was elected to", "joined", "became a member of", "was admitted to"],
    "it is known for its": ["it is known for its", "visitors remember its", "it is famous for its",
                            "guidebooks praise its", "it stands out for its"],
    "facade": ["facade", "front", "frontage", "exterior", "entrance hall"],
    "its main building is made of": ["its main building is made of", "its hall is built from",
                                     "the main block uses", "its oldest wing is of"],
    "and painted": ["and painted", "and finished in", "with trim in", "and coloured"],
    "it holds about": ["it holds about", "it keeps roughly", "its collection counts about", "it houses nearly"],
    "items": ["items", "objects", "pieces", "works"],
    "it was restored in": ["it was restored in", "it was renovated in", "repairs were finished in",
                           "it reopened after restoration in"],
    "it had about": ["it had about", "it counted roughly", "its population was near", "it was home to about"],
    "inhabitants in": ["inhabitants in", "residents in", "people in", "citizens in"],
    "wrote about": ["wrote about", "described", "wrote on", "published notes on", "sketched"],
    "writings by": ["writings by", "letters from", "essays of", "notebooks of"],
    "also mention the area around": ["also mention the area around", "refer to the country near",
                                     "describe the land around", "talk about the district of"],
}


def pick(rng: random.Random, key: str) -> str:
    """A random wording of a phrase from PARAPHRASES (one rng draw: cheap enough for every sentence)."""
    return rng.choice(PARAPHRASES[key])
