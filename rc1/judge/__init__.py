"""The LLM judge: what it is asked (prompts), which endpoint answers (providers), the client that asks with
retries and a persistent cache (client, cache), rc1's own llama.cpp server (server, llama_launch), the judge
in the training loop (live) and the probe of whether it tells right from wrong (probe).

It knows nothing of rewards: rc1.rewards decides which dimensions it grades and folds its grades in."""
