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
PRONOUNS_ZH = ("其", "他", "她", "它", "他们", "她们", "它们", "这", "那")


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
