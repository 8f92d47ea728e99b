"""Task data: sources, templates, the seed pool, its validation, difficulty and the shadow set.

Pipeline (each step is a `rc1 data ...` command and a function in `rc1.data.pipeline`)::

    build-pool (v2)  -> data/rollouts/rc1_seed.jsonl           generators + templates/pack_v2, seeded
    build-pool --version v1 -> data/rollouts/rc1_v1.jsonl      the previous pool (reference for 3-gram KL)
    shadow-set       -> data/shadow_eval_245.jsonl + reports/rc1/sample_manifest.json
    validate-pool    -> reports/diversity_report.json          exit 3 on any failing check
    difficulty metrics   -> data/rollouts/rc1_seed.metrics.jsonl
    difficulty bucketize -> data/rollouts/rc1_seed.balanced.jsonl
    difficulty validate  -> reports/rc1/difficulty_report.json

Modules: `generators` (offline tasks in the real source formats, difficulty designed in),
`sources` (GSM8K / HotpotQA / StrategyQA loaders via `datasets`, one normaliser for real and
generated records), `templates` (pydantic-validated template packs), `pool` (item rendering,
clarify items), `generic` (custom tasks: a JSONL task file + a named verifier -> pool items, the held-out
split), `applicability` (which checks a custom task's items lack the fields for: reported N/A with the
reason), `v1` (the deliberately simpler previous generator), `diversity` (lexical stats,
MinHash-LSH dedup and leak check), `difficulty` (metrics, buckets, balancing, report), `tokens`
(base-model token counts with a recorded fallback chain). Its benchmark is rc1.bench.data.

Definitions worth knowing:
- distinct-n / TTR are the mean over windows of `pool.distinct2_window` items (gates config, 64) of a
  seeded `pool.diversity_sample`-item sample: corpus-level distinct-n shrinks as the corpus grows, so a
  fixed threshold needs a fixed window. The whole-pool value is reported beside it.
- The v1 pool is built by `rc1.data.v1`: one frame per task, a 20-name vocabulary, one template per
  task (role "assistant", style "plain"). KL is KL(v2 || v1) over word 3-grams, v1 add-0.5 smoothed,
  minus the split-half baseline KL(A || B) of two disjoint halves of the pool (chance alone gives that).
- The shadow set uses its own seed/id space ("shadow"), so no pool item shares a random stream or
  an id with it; the leak check still measures text overlap, it does not trust the spaces.
"""
