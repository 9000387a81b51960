#!/usr/bin/env python3
"""embed_gpu.py: the sentence-transformers side of bench/embed_gpu.sh, and its helpers.

  synth VOCAB LINES WORDS SEED     prints LINES lines of WORDS distinct-enough vocabulary words that are
                                   one WordPiece token each, so every line is WORDS + 2 tokens
  st MODEL_DIR BATCH REPS OUT_DIR CORPUS...
                                   sentence-transformers on the GPU in fp16 (model.half(), attention through
                                   PyTorch's scaled_dot_product_attention), per corpus:
                                   'forward': the model's forward pass (BERT + mean pooling + normalise) on
                                   pre-tokenized batches already on the GPU, sorted longest first by token
                                   count and padded to each batch's longest, timed with CUDA events around
                                   each batch and summed; 'encode': SentenceTransformer.encode(batch_size=
                                   BATCH) wall time (tokenisation, forward, copy to the host). One warm-up,
                                   REPS timed runs, medians. Saves encode()'s embeddings as OUT_DIR/st_<name>.f32.
  report OUT_DIR                   the table (markdown) and OUT_DIR/results.csv from OUT_DIR's va_forward.jsonl
                                   (embed_gpu_bench), st.jsonl (above) and cmd.jsonl (whole vecanneal embed runs)
Each result is one JSON line."""
import csv
import json
import os
import random
import statistics
import sys
import time


def synth(vocab, lines, words, seed):
    toks = [w for w in open(vocab, encoding="utf-8").read().split("\n") if w.isascii() and w.isalpha() and w.islower() and len(w) >= 3]
    rng = random.Random(int(seed))
    out = sys.stdout
    for _ in range(int(lines)):
        out.write(" ".join(rng.choice(toks) for _ in range(int(words))) + "\n")


def read_lines(path):
    lines = [l.decode("utf-8", "replace") for l in open(path, "rb").read().split(b"\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def st(model_dir, batch, reps, out_dir, *corpora):
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    batch, reps = int(batch), int(reps)
    model = SentenceTransformer(model_dir, device="cuda", model_kwargs={"attn_implementation": "sdpa"})
    model.max_seq_length = 256  # the model's own truncation, as vecanneal embed's (docs/embed.md)
    model.half()
    model.eval()
    dev = torch.cuda.get_device_name(0)
    attn = getattr(model[0].auto_model.config, "_attn_implementation", "unknown")  # PyTorch's fused SDPA
    for path in corpora:
        name = os.path.splitext(os.path.basename(path))[0]
        lines = read_lines(path)
        n = len(lines)
        # forward alone: tokenize every line once (no padding) to sort by token count, then batch + pad
        lens = [len(x) for x in model.tokenizer(lines, truncation=True, max_length=model.max_seq_length)["input_ids"]]
        order = sorted(range(n), key=lambda i: (-lens[i], i))
        feats = []
        for s in range(0, n, batch):
            f = model.tokenize([lines[i] for i in order[s:s + batch]])
            feats.append({k: v.to("cuda") if isinstance(v, torch.Tensor) else v for k, v in f.items()})
        torch.cuda.synchronize()

        def forward_pass():
            evs = []
            with torch.inference_mode():
                for f in feats:
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    model(dict(f))["sentence_embedding"]
                    b.record()
                    evs.append((a, b))
            torch.cuda.synchronize()
            return sum(a.elapsed_time(b) for a, b in evs)

        forward_pass()
        fwd = statistics.median(forward_pass() for _ in range(reps))
        padded = sum(f["input_ids"].numel() for f in feats)
        # encode(): the whole pipeline as a user calls it
        model.encode(lines[:batch * 4], batch_size=batch)
        walls = []
        emb = None
        for _ in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            emb = model.encode(lines, batch_size=batch, convert_to_numpy=True)
            walls.append(time.perf_counter() - t0)
        wall = statistics.median(walls)
        emb.astype("<f4").tofile(os.path.join(out_dir, f"st_{name}.f32"))
        print(json.dumps({"impl": "sentence-transformers", "torch": torch.__version__, "device": dev,
                          "precision": "fp16", "attention": attn, "corpus": path,
                          "lines": n, "tokens": sum(lens), "padded_tokens": padded, "batch": batch, "reps": reps,
                          "forward_ms_median": round(fwd, 3), "forward_sentences_per_s": round(n / (fwd * 1e-3), 1),
                          "encode_s_median": round(wall, 4), "encode_sentences_per_s": round(n / wall, 1)}), flush=True)


def report(out_dir):
    def load(name):
        p = os.path.join(out_dir, name)
        return [json.loads(l) for l in open(p) if l.startswith("{")] if os.path.exists(p) else []

    va, stj, cmd = load("va_forward.jsonl"), load("st.jsonl"), load("cmd.jsonl")
    rows = []  # corpus, lines, tokens, what, impl, precision, seconds, sentences/s, ratio
    for s in stj:
        c = os.path.basename(s["corpus"])
        rows.append((c, s["lines"], s["tokens"], "encoder forward (CUDA events)", "sentence-transformers", "fp16", s["forward_ms_median"] / 1e3,
                     s["forward_sentences_per_s"], 1.0))
        for v in va:
            if os.path.basename(v["corpus"]) == c:
                rows.append((c, v["lines"], v["tokens"], "encoder forward (CUDA events)", "vecanneal", v["precision"], v["forward_ms_median"] / 1e3, v["forward_sentences_per_s"], v["forward_sentences_per_s"] / s["forward_sentences_per_s"]))
                rows.append((c, v["lines"], v["tokens"], "encoder pass incl. host packing and copies (host clock)", "vecanneal", v["precision"],
                             v["pass_ms_median"] / 1e3, v["pass_sentences_per_s"], v["pass_sentences_per_s"] / s["forward_sentences_per_s"]))
        rows.append((c, s["lines"], s["tokens"], "encode() / whole command", "sentence-transformers encode()", "fp16", s["encode_s_median"],
                     s["encode_sentences_per_s"], 1.0))
        for m in cmd:
            if os.path.basename(m["corpus"]) == c:
                rows.append((c, m["lines"], m["tokens"], "encode() / whole command", "vecanneal embed (whole command, start-up and write included)",
                             m["precision"], m["wall_s"], m["lines"] / m["wall_s"], m["lines"] / m["wall_s"] / s["encode_sentences_per_s"]))
                te = m["tokenize_s"] + m["encode_s"]
                rows.append((c, m["lines"], m["tokens"], "encode() / whole command", "vecanneal embed (tokenize + encode phases)", m["precision"], te,
                             m["lines"] / te, m["lines"] / te / s["encode_sentences_per_s"]))
    hdr = ["corpus", "lines", "tokens", "what", "impl", "precision", "seconds", "sentences_per_s", "ratio_vs_sentence_transformers"]
    with open(os.path.join(out_dir, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(hdr)
        for r in rows:
            w.writerow([f"{x:.6g}" if isinstance(x, float) else x for x in r])
    print("| corpus | lines | what | implementation | precision | seconds | sentences/s | vs sentence-transformers |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.4f} | {r[7]:,.0f} | {r[8]:.2f}x |")


if __name__ == "__main__":
    {"synth": synth, "st": st, "report": report}[sys.argv[1]](*sys.argv[2:])
