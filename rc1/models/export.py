"""Export a trained model to GGUF (for llama.cpp), for the Llama and Qwen3 architectures.

`export_model(model, tokenizer, out_dir)` merges LoRA adapters (peft `merge_and_unload` on a
copy), saves the plain HF directory `out_dir/hf/`, converts it with `convert_hf_to_gguf` into
`out_dir/model.gguf` and returns both paths. The conversion is ours, written with the `gguf`
package's `GGUFWriter` (llama.cpp's convert_hf_to_gguf.py is not shipped by any installed
package): HF tensor names map to GGUF names, Llama's q/k projections are un-permuted back to
llama.cpp's rotary layout, Qwen3 keeps its q/k norms; the byte-level BPE vocabulary, merges,
special tokens and chat template go into the tokenizer metadata. Matrices are written as f32,
f16 or q8_0 (the `gguf` package's Q8_0 quantizer; a matrix whose rows are not a multiple of its
32-value block falls back to f16, and norms stay f32, as llama.cpp's converter does).
`verify_gguf` runs llama.cpp (`llama_cpp.Llama`) and transformers greedily on the same prompt
tokens and reports any difference. `export_gguf(model, tokenizer, out_file)` does all of it for
`rc1 export gguf`: the GGUF appears at `out_file` only after llama.cpp agreed with transformers.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rc1.runtime.errors import ConfigError, GateRefused

log = logging.getLogger("rc1.models")

SUPPORTED = ("llama", "qwen3")
OUTTYPES = ("f32", "f16", "bf16", "q8_0")
CHECK_PROMPTS = ("What is 2+3?", "Name a river in France.")   # what export_gguf's llama.cpp check runs
_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_TOP_MAP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
            "lm_head.weight": "output.weight"}


def _require_gguf():
    try:
        import gguf  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"GGUF export needs the `gguf` package (pip install gguf): {exc}")
    return gguf


def _rope_theta(cfg: dict) -> float:
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    theta = params.get("rope_theta", cfg.get("rope_theta"))
    if theta is None:
        raise ConfigError("GGUF export: config.json has no rope_theta")
    if params.get("rope_type", "default") not in ("default", None):
        raise ConfigError(f"GGUF export: rope_type {params.get('rope_type')!r} is not supported (only default)")
    return float(theta)


def _pretokenizer(tok, cfg: dict, pre: str | None) -> str:
    """llama.cpp's name for the tokenizer's pre-tokenization regex (it cannot be inferred in general)."""
    if pre:
        return pre
    if tok.convert_ids_to_tokens(1) == "<|im_start|>" and len(tok) in (49152, 49154):
        return "smollm"  # SmolLM2 tokenizer (also used by random:qwen3-tiny)
    if cfg["model_type"] == "qwen3" and len(tok) > 150000:
        return "qwen2"
    raise ConfigError("GGUF export: cannot tell llama.cpp's pre-tokenizer for this tokenizer; pass pre= "
                      "(e.g. 'llama-bpe', 'qwen2', 'smollm')")


def _vocab(tok):
    import gguf

    vocab = tok.get_vocab()
    n = len(tok)
    by_id = {i: t for t, i in vocab.items()}
    added = tok.added_tokens_decoder  # id -> AddedToken
    tokens, types = [], []
    for i in range(n):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        tokens.append(by_id[i])
        if i in added:
            types.append(gguf.TokenType.CONTROL if added[i].special else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def _merges(hf_dir: Path) -> list[str]:
    data = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    model = data.get("model", {})
    if model.get("type") != "BPE":
        raise ConfigError(f"GGUF export: only byte-level BPE tokenizers are supported (got {model.get('type')})")
    return [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]


def _permute(w, n_head: int):
    """Undo HF's rotary permutation of Llama q/k weights (llama.cpp uses the interleaved layout)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _encode(gguf, arr, outtype: str):
    """(data, raw GGML type or None) of one f32 tensor in `outtype`; norms (1-D) stay f32."""
    import numpy as np

    if arr.ndim < 2 or outtype == "f32":
        return arr, None
    if outtype == "bf16":
        bf16 = gguf.GGMLQuantizationType.BF16
        return gguf.quants.quantize(arr, bf16), bf16
    q8 = gguf.GGMLQuantizationType.Q8_0
    if outtype == "q8_0" and arr.shape[-1] % gguf.GGML_QUANT_SIZES[q8][0] == 0:
        return gguf.quants.quantize(arr, q8), q8
    return arr.astype(np.float16), None


def _finish_gguf(w, tmp: Path, out_path: Path) -> None:
    """Write GGUFWriter `w` (opened on `tmp`) out and publish it at `out_path` atomically; `tmp` is removed."""
    from rc1.runtime.atomic import atomic_output

    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with atomic_output(out_path, "wb") as fh, open(tmp, "rb") as src:
            while chunk := src.read(1 << 24):
                fh.write(chunk)
    finally:
        tmp.unlink(missing_ok=True)


def convert_hf_to_gguf(hf_dir: str | os.PathLike, out_path: str | os.PathLike, *, outtype: str = "f32",
                       pre: str | None = None) -> Path:
    """Write `out_path` (GGUF) from a plain HF Llama/Qwen3 directory with safetensors weights."""
    gguf = _require_gguf()
    import numpy as np
    from safetensors.numpy import load_file
    from transformers import AutoTokenizer

    hf_dir, out_path = Path(hf_dir), Path(out_path)
    cfg = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
    arch = cfg.get("model_type")
    if arch not in SUPPORTED:
        raise ConfigError(f"GGUF export: architecture {arch!r} is not supported (supported: {list(SUPPORTED)})")
    if outtype not in OUTTYPES:
        raise ConfigError(f"GGUF export: dtype {outtype!r} is not supported; use one of {', '.join(OUTTYPES)}")
    shards = sorted(hf_dir.glob("*.safetensors"))
    if not shards:
        raise ConfigError(f"GGUF export: no *.safetensors in {hf_dir}")
    tok = AutoTokenizer.from_pretrained(str(hf_dir))
    n_head, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head

    tmp = out_path.with_name(f".{out_path.name}.writing")
    w = gguf.GGUFWriter(str(tmp), arch)
    w.add_name(str(cfg.get("_name_or_path") or hf_dir.name))
    w.add_context_length(int(cfg.get("max_position_embeddings", 4096)))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(_rope_theta(cfg))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    if arch == "llama":
        w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(len(tok))
    w.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                     "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[outtype])
    tokens, types = _vocab(tok)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(_pretokenizer(tok, cfg, pre))
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(_merges(hf_dir))
    for setter, tid in ((w.add_bos_token_id, tok.bos_token_id), (w.add_eos_token_id, tok.eos_token_id),
                        (w.add_pad_token_id, tok.pad_token_id), (w.add_unk_token_id, tok.unk_token_id)):
        if tid is not None:
            setter(int(tid))
    w.add_add_bos_token(False)
    if tok.chat_template:
        w.add_chat_template(tok.chat_template)

    tied = bool(cfg.get("tie_word_embeddings"))
    seen: set[str] = set()
    for shard in shards:
        for name, arr in load_file(str(shard)).items():
            m = _LAYER.match(name)
            if m and m.group(2) in _LAYER_MAP:
                target = f"blk.{m.group(1)}.{_LAYER_MAP[m.group(2)]}"
            elif name in _TOP_MAP:
                target = _TOP_MAP[name]
            elif name.endswith("rotary_emb.inv_freq"):
                continue
            else:
                raise ConfigError(f"GGUF export: no GGUF name for tensor {name!r} ({arch})")
            if target == "output.weight" and tied:
                continue
            arr = arr.astype(np.float32)
            if arch == "llama" and target.endswith("attn_q.weight"):
                arr = _permute(arr, n_head)
            elif arch == "llama" and target.endswith("attn_k.weight"):
                arr = _permute(arr, n_kv)
            data, raw_dtype = _encode(gguf, arr, outtype)
            w.add_tensor(target, np.ascontiguousarray(data), raw_dtype=raw_dtype)
            seen.add(target)
    if "token_embd.weight" not in seen:
        raise ConfigError("GGUF export: no embedding tensor found")
    _finish_gguf(w, tmp, out_path)
    log.info("GGUF written: %s (%s, %d tensors)", out_path, arch, len(seen))
    return out_path


def merged_copy(model):
    """A plain transformers model: LoRA adapters merged into a copy (the training model is untouched)."""
    if hasattr(model, "merge_and_unload"):
        if getattr(model, "is_loaded_in_4bit", False) or getattr(model.get_base_model(), "is_loaded_in_4bit", False):
            raise ConfigError("GGUF export of a QLoRA model: reload the base in full precision, load the adapter, "
                              "then export (merging into 4-bit weights would lose precision)")
        return copy.deepcopy(model).merge_and_unload()
    return model


def save_merged(model, tokenizer, hf_dir: str | os.PathLike) -> Path:
    """The plain HF directory (LoRA merged, safetensors) that convert_hf_to_gguf reads."""
    hf_dir = Path(hf_dir)
    merged_copy(model).save_pretrained(str(hf_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(hf_dir))
    return hf_dir


def export_model(model, tokenizer, out_dir: str | os.PathLike, *, outtype: str = "f32",
                 pre: str | None = None) -> dict[str, Path]:
    """Merge LoRA, save `out_dir/hf/`, convert to `out_dir/model.gguf`."""
    out_dir = Path(out_dir)
    hf_dir = save_merged(model, tokenizer, out_dir / "hf")
    gguf_file = convert_hf_to_gguf(hf_dir, out_dir / "model.gguf", outtype=outtype, pre=pre)
    return {"hf_dir": hf_dir, "gguf": gguf_file}


@dataclass(frozen=True)
class GgufExport:
    path: Path
    outtype: str
    size_bytes: int
    prompts_checked: int    # prompts on which llama.cpp and transformers generated the same tokens


def export_gguf(model, tokenizer, out_file: str | os.PathLike, *, outtype: str = "f32",
                prompts: tuple[str, ...] = CHECK_PROMPTS, new_tokens: int = 8, pre: str | None = None) -> GgufExport:
    """Merge LoRA, convert to GGUF, and put it at `out_file` only if llama.cpp agrees with transformers.

    The merged HF directory and the unverified GGUF are written beside `out_file` (same disk) and
    removed afterwards. Raises ConfigError for a bad dtype or model, GateRefused (naming every
    disagreement) when the check fails; `out_file` is then left as it was."""
    if outtype not in OUTTYPES:
        raise ConfigError(f"--dtype {outtype!r}: not a GGUF export type; use one of {', '.join(OUTTYPES)}")
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    staged = out_file.with_name(f".{out_file.name}.unverified")
    with tempfile.TemporaryDirectory(prefix=".rc1-export-", dir=out_file.parent) as tmp:
        try:
            hf_dir = save_merged(model, tokenizer, Path(tmp) / "hf")
            convert_hf_to_gguf(hf_dir, staged, outtype=outtype, pre=pre)
            problems = GgufChecker(hf_dir).check(staged, list(prompts), new_tokens=new_tokens)
            if problems:
                raise GateRefused(f"{out_file.name}: llama.cpp and transformers disagree on {len(problems)} of "
                                  f"{len(prompts)} check prompts; nothing written", lines=problems)
            os.replace(staged, out_file)
        finally:
            staged.unlink(missing_ok=True)
    log.info("GGUF export verified against transformers on %d prompts: %s (%s)", len(prompts), out_file, outtype)
    return GgufExport(out_file, outtype, out_file.stat().st_size, len(prompts))


class GgufChecker:
    """Compares llama.cpp running GGUF files with transformers running `hf_dir` (loaded once)."""

    def __init__(self, hf_dir: str | os.PathLike):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        try:
            import llama_cpp  # noqa: F401
        except ImportError as exc:
            raise ConfigError(f"GGUF verification needs llama-cpp-python (pip install llama-cpp-python): {exc}")
        self.tok = AutoTokenizer.from_pretrained(str(hf_dir))
        self.model = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32).eval()

    def check(self, gguf_file: str | os.PathLike, prompts: list[str], *, new_tokens: int = 8) -> list[str]:
        """Greedy continuations of both on the same prompt tokens; [] when all agree.

        Also checks that llama.cpp tokenizes each rendered prompt exactly as transformers does.
        """
        import torch
        from llama_cpp import Llama

        tok, model = self.tok, self.model
        llm = Llama(model_path=str(gguf_file), n_ctx=512, n_threads=max(1, torch.get_num_threads()), verbose=False)
        problems = []
        try:
            for prompt in prompts:
                text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                               add_generation_prompt=True)
                ids = tok(text, add_special_tokens=False)["input_ids"]
                cpp_ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
                if list(cpp_ids) != list(ids):
                    problems.append(f"{prompt!r}: llama.cpp tokenizes differently ({len(cpp_ids)} vs {len(ids)} tokens)")
                with torch.inference_mode():
                    hf = model.generate(input_ids=torch.tensor([ids]),
                                        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                        max_new_tokens=new_tokens, do_sample=False)[0, len(ids):].tolist()
                cpp = []
                for t in llm.generate(ids, temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0, reset=True):
                    cpp.append(int(t))
                    if len(cpp) >= len(hf) or t == tok.eos_token_id:
                        break
                if cpp != hf:
                    problems.append(f"{prompt!r}: transformers {tok.decode(hf)!r} vs llama.cpp {tok.decode(cpp)!r}")
        finally:
            llm.close()
        return problems


def verify_gguf(hf_dir: str | os.PathLike, gguf_file: str | os.PathLike, prompts: list[str], *,
                new_tokens: int = 8) -> list[str]:
    """`GgufChecker(hf_dir).check(gguf_file, prompts)`: [] when llama.cpp and transformers agree."""
    return GgufChecker(hf_dir).check(gguf_file, prompts, new_tokens=new_tokens)


_LORA_PARAM = re.compile(r"^(?:base_model\.model\.)?(model\.layers\.\d+\..+)\.lora_([AB])\.([^.]+)\.weight$")


def lora_tensors(model, adapter: str = "default") -> tuple[dict[str, "object"], float, int]:
    """({GGUF tensor name: float32 numpy array}, alpha, rank) of a PEFT LoRA model's adapter
    (lora_gguf_tensors of its live parameters: no save, no merge)."""
    cfg = model.peft_config[adapter]
    base_cfg = model.get_base_model().config
    n_head = base_cfg.num_attention_heads
    tensors, rank = lora_gguf_tensors(model.named_parameters(), arch=base_cfg.model_type, n_head=n_head,
                                      n_kv=getattr(base_cfg, "num_key_value_heads", None) or n_head, adapter=adapter)
    if getattr(cfg, "use_rslora", False):
        raise ConfigError("LoRA GGUF: rsLoRA's alpha / sqrt(r) scale has no llama.cpp equivalent; use plain LoRA")
    return tensors, float(cfg.lora_alpha), rank


def lora_gguf_tensors(named_parameters, *, arch: str, n_head: int, n_kv: int,
                      adapter: str = "default") -> tuple[dict[str, "object"], int]:
    """({GGUF tensor name: float32 numpy array}, rank) of the LoRA tensors among PEFT-named (name, tensor) pairs,
    named as llama.cpp's LoRA loader expects (`blk.<i>.attn_q.weight.lora_a` [r, in], `.lora_b` [out, r], the torch
    layouts) with Llama's q/k rotary permutation applied to B's output rows as the base export applies it to the
    weight ((P B) A = P (B A))."""
    import numpy as np

    if arch not in SUPPORTED:
        raise ConfigError(f"LoRA GGUF: architecture {arch!r} is not supported (supported: {list(SUPPORTED)})")
    out: dict[str, np.ndarray] = {}
    rank = None
    for name, p in named_parameters:
        m = _LORA_PARAM.match(name)
        if m is None or m.group(3) != adapter:
            continue
        layer = _LAYER.match(m.group(1) + ".weight")
        if layer is None or layer.group(2) not in _LAYER_MAP:
            raise ConfigError(f"LoRA GGUF: no GGUF name for the adapted module {m.group(1)!r}")
        target = f"blk.{layer.group(1)}.{_LAYER_MAP[layer.group(2)]}"
        arr = p.detach().float().cpu().numpy()
        if m.group(2) == "A":
            rank = arr.shape[0]
        elif arch == "llama" and target.endswith("attn_q.weight"):
            arr = _permute(arr, n_head)
        elif arch == "llama" and target.endswith("attn_k.weight"):
            arr = _permute(arr, n_kv)
        out[f"{target}.lora_{m.group(2).lower()}"] = np.ascontiguousarray(arr, dtype=np.float32)
    if not out or rank is None:
        raise ConfigError(f"LoRA GGUF: the model has no LoRA tensors of adapter {adapter!r}")
    return out, int(rank)


def write_lora_gguf(model, out_path: str | os.PathLike, adapter: str = "default") -> Path:
    """A llama.cpp LoRA adapter GGUF of a PEFT model's adapter, straight from its tensors (write_lora_tensors)."""
    tensors, alpha, _ = lora_tensors(model, adapter)
    return write_lora_tensors(tensors, alpha, model.get_base_model().config.model_type, out_path)


def write_lora_tensors(tensors: dict, alpha: float, arch: str, out_path: str | os.PathLike) -> Path:
    """A llama.cpp LoRA adapter GGUF (general.type adapter, adapter.type lora, adapter.lora.alpha) of `tensors`
    (lora_gguf_tensors' names and layouts), written atomically. llama.cpp scales it by alpha / r, as PEFT does."""
    gguf = _require_gguf()
    out_path = Path(out_path)
    tmp = out_path.with_name(f".{out_path.name}.writing")
    w = gguf.GGUFWriter(str(tmp), arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", alpha)
    for name, arr in tensors.items():
        w.add_tensor(name, arr)
    _finish_gguf(w, tmp, out_path)
    return out_path
