"""Token counts read tokenizer.json with `tokenizers` alone only once it is checked to be transformers' tokenizer."""

import json
import shutil

from rc1.data import tokens

TEXTS = ["Sam has 45 shells and finds 17 more.", "  spaces\tand\nnewlines ", "数字 12345 和 ünïcödé", ""]


def _model_copy(tiny_dir, tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_dir / name, root / name)
    return root


def test_the_fast_path_counts_what_transformers_counts_and_skips_it_once_checked(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("RC1_CACHE", str(tmp_path / "cache"))
    root = _model_copy(tiny_dir, tmp_path)
    want = [len(ids) for ids in tokens._load_tokenizer(root)(TEXTS, add_special_tokens=False)["input_ids"]]

    first = tokens._from_loader(str(root))
    assert first.count_batch(TEXTS) == want and first.is_model_tokenizer
    assert len(list((tmp_path / "cache" / "tokenizers" / "same_as_transformers").glob("*.ok"))) == 1

    def no_transformers(base):
        raise AssertionError("transformers loaded again after the check passed")
    monkeypatch.setattr(tokens, "_load_tokenizer", no_transformers)
    again = tokens._from_loader(str(root))
    assert again.count_batch(TEXTS) == want and again.name == first.name  # the token-count cache key is unchanged


def test_a_tokenizer_json_transformers_reads_differently_is_not_trusted(tiny_dir, tmp_path, monkeypatch):
    """A tokenizer class that rebuilds its tokenizer its own way (here: transformers' differs from the file by
    a lowercasing normalizer) fails the check; counts come from transformers' tokenizer and nothing is recorded."""
    from tokenizers import Tokenizer, normalizers

    monkeypatch.setenv("RC1_CACHE", str(tmp_path / "cache"))
    root = _model_copy(tiny_dir, tmp_path)
    real = tokens._load_tokenizer(root)
    backend = Tokenizer.from_str(real.backend_tokenizer.to_str())
    backend.normalizer = normalizers.Lowercase()

    class Rebuilt:
        backend_tokenizer = backend

    monkeypatch.setattr(tokens, "_load_tokenizer", lambda base: Rebuilt())
    counter = tokens._from_loader(str(root))
    texts = ["ABCDEF GHIJ", "Hello World"]
    assert counter.count_batch(texts) == [len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False)]
    from_file = Tokenizer.from_file(str(root / "tokenizer.json")).encode_batch(texts, add_special_tokens=False)
    assert counter.count_batch(texts) != [len(e.ids) for e in from_file]  # the two really count differently
    assert not list((tmp_path / "cache").rglob("*.ok"))

    # and a changed tokenizer.json is checked again, not read on an old marker
    monkeypatch.setattr(tokens, "_load_tokenizer", lambda base: real)
    tokens._from_loader(str(root))
    data = json.loads((root / "tokenizer.json").read_text())
    data["added_tokens"] = data.get("added_tokens", []) + [
        {"id": max(t["id"] for t in data["added_tokens"]) + 1, "content": "<rc1-new>", "single_word": False,
         "lstrip": False, "rstrip": False, "normalized": False, "special": True}]
    (root / "tokenizer.json").write_text(json.dumps(data))
    monkeypatch.setattr(tokens, "_load_tokenizer", lambda base: Rebuilt())
    assert tokens._from_loader(str(root)).count_batch(texts) == counter.count_batch(texts)
