#!/usr/bin/env python3
"""make_fixture.py: builds the committed reference fixtures of the embed tests (run by make_fixture.sh,
which sets up a virtual environment with the reference packages; nothing here runs in CI).

Writes, under tests/data/:
  embed_corpus.txt.gz     the tokenizer corpus, one text per line ('\\n'-separated raw bytes): WordNet
                          glosses (wordnet-base), English fortunes (fortunes), fortunes in German,
                          Russian, Czech, Polish, Spanish, Esperanto, Bulgarian and Chinese
                          (fortunes-de/-ru/-cs/-pl/-es/-eo/-bg/-zh), over-long lines (truncation),
                          adversarial lines (accents, combining marks, format/control characters,
                          literal special tokens, words over 100 characters, invalid UTF-8) and a
                          sweep of code points 0x80..0x323AF and the E0000 plane.
  embed_corpus_ids.bin.gz the reference ids: "VATOKID1", uint32 line count, then per line uint16 n and
                          n uint16 ids (little-endian), from Hugging Face's fast tokenizer (tokenizer.json
                          of the model, truncation at 256, no padding); lines are decoded from UTF-8 with
                          errors='replace' first, as `vecanneal embed` does.
  embed_ref.txt           200 lines of that corpus (mixed kinds, including an empty line and lines over
                          256 tokens)
  embed_ref.f32           their sentence-transformers embeddings: "VAEMBF32", uint32 rows, uint32 dim,
                          then rows x dim little-endian float32 (fp32 on the CPU, normalised)
  embed_small.jsonl       lines 101..120 of embed_ref.txt as JSONL (extra fields, escapes)
usage: make_fixture.py MODEL_DIR OUT_DIR
"""
import glob
import gzip
import os
import random
import re
import struct
import sys

MODEL, OUT = sys.argv[1], sys.argv[2]
MAX_TOKENS = 256
rng = random.Random(20240611)


def fortune_lines(paths):
    lines = []
    for p in sorted(paths):
        if os.path.isdir(p) or p.endswith(".dat") or p.endswith(".u8"):
            continue
        for line in open(p, "rb").read().split(b"\n"):
            line = line.rstrip(b"\r")
            if line.strip() and line.strip() != b"%":
                lines.append(line)
    return lines


def sample(lines, k):
    if len(lines) <= k:
        return list(lines)
    step = len(lines) / k
    return [lines[int(i * step)] for i in range(k)]


def wordnet_glosses():
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        for line in open("/usr/share/wordnet/data.%s" % pos, "rb"):
            if line.startswith(b"  ") or b" | " not in line:
                continue
            out.append(line.split(b" | ", 1)[1].rstrip())
    return out


def adversarial(words):
    """Lines that stress the corner cases of normalisation, splitting, WordPiece and UTF-8 decoding."""
    palette = [
        "é", "É", "ñ", "Ñ", "ü", "Ü", "ß", "ẞ", "İ", "ı", "Σ", "ς", "σ", "Å", "ø", "Ø", "æ", "œ", "Œ", "ĳ",
        "e\u0301", "a\u0308", "\u0301", "\u0327", "\u20dd", "\u0903", "\u1734", "\U00011938",
        "\u200b", "\u200d", "\u00ad", "\ufeff", "\u2060", "\u061c", "\u0085", "\u2028", "\u2029",
        "\u00a0", "\u3000", "\u2003", "\u202f", "\x0b", "\x0c", "\x1c", "\x1f", "\x7f", "\x01", "\t", "\r",
        "\x1b[1;31m", "\ufffd", "\ue000", "\U000f0000", "\u0378", "\U000e0001", "\U000e0041",
        "中", "文", "字", "漢", "\uf900", "\U0002f800", "\U0002b820", "\U0002b920", "\u3400", "\U00020000",
        "한", "국", "어", "\u1100\u1161", "ア", "ｱ", "ｶﾞ", "が", "か\u3099", "Ａ", "ａ", "１", "！", "。", "、", "「", "」",
        "α", "Ω", "ά", "ΐ", "Я", "я", "Ё", "ё", "й", "Ꭰ", "ꭰ", "ǅ", "ǆ", "ﬁ", "ﬀ", "ℌ", "ℵ", "𝐀", "𝔄",
        "😀", "👍🏽", "🇩🇪", "❤️", "🥰", "🫠", "☃", "♥", "€", "£", "¥", "©", "®", "™", "°", "±", "µ", "¶", "§",
        "—", "–", "…", "‘", "’", "“", "”", "«", "»", "‹", "›", "¿", "¡", "·", "•", "†", "‡", "‰", "′",
        "\u2e43", "\u2e5d", "\u061d", "\u0f0b", "\u104a", "\u00b7", "\u02bc", "\u02c6", "^", "`", "~", "_",
        "[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[mask]", "[ MASK ]", "[MASK", "MASK]", "[[SEP]]",
        "ﷺ", "ﷻ", "ا", "ل", "ع", "ر", "ب", "ي", "ة", "\u064b", "\u0670", "ह", "ि", "न्", "द", "ी", "\u094d",
        "ก", "\u0e34", "\u0e48", "ม", "ɐ", "ʃ", "ŋ", "ð", "þ", "Þ", "ﬃ", "№", "℃", "Ⅻ", "ⅻ", "½", "²", "₂",
    ]
    out = []
    for i in range(1500):
        parts = []
        for _ in range(rng.randint(1, 25)):
            r = rng.random()
            if r < 0.45:
                parts.append(rng.choice(words))
            elif r < 0.9:
                parts.append(rng.choice(palette))
            else:
                parts.append(rng.choice(words) + rng.choice(palette) + rng.choice(words))
        sep = rng.choice([" ", "", " ", "\t", "  "])
        line = sep.join(parts).replace("\n", " ").encode("utf-8", "surrogatepass")
        if i % 7 == 0:  # ill-formed UTF-8 at a random place
            bad = rng.choice([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80\x80",
                              b"\xf5\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\xaf", b"\xc3", b"\xfe\xfe"])
            k = rng.randint(0, len(line))
            line = line[:k] + bad + line[k:]
        out.append(line)
    # words over 100 code points, numbers, repeated punctuation, a line of only spaces and control chars
    out.append(("a" * 100).encode())
    out.append(("a" * 101).encode())
    out.append(("é" * 100 + " é").encode())
    out.append(("ab" * 60 + " antidisestablishmentarianism " + "x" * 99 + "é").encode())
    out.append(b"3.14159265358979323846264338327950288419716939937510 1,000,000 0xdeadbeef")
    out.append(b"!!!???...,,,;;;:::---___''''\"\"\"((()))[[[]]]{{{}}}")
    out.append(b" \t \x0b\x0c \xc2\xa0 \xe3\x80\x80 ")
    out.append(b"\x01\x02\x03")
    out.append(b"")
    out.append(b"[MASK][MASK]x[SEP]y[CLS]")
    return out


def sweep():
    """Every code point from 0x80 to 0x323AF and of the E0000 plane, 4 to a word, 12 words a line."""
    cps = list(range(0x80, 0x323B0)) + list(range(0xE0000, 0xE0200)) + [0xF0000, 0xFFFFD, 0x100000, 0x10FFFD]
    cps = [c for c in cps if not 0xD800 <= c < 0xE000]
    lines = []
    for i in range(0, len(cps), 48):
        chunk = cps[i:i + 48]
        words = ["".join(chr(c) for c in chunk[j:j + 4]) for j in range(0, len(chunk), 4)]
        lines.append(" ".join(words).encode("utf-8"))
    return lines


def main():
    gloss = wordnet_glosses()
    en = fortune_lines(glob.glob("/usr/share/games/fortunes/*"))
    intl = {}
    for lang in ("de", "ru", "cs", "pl", "es", "eo", "bg"):
        intl[lang] = fortune_lines(glob.glob("/usr/share/games/fortunes/%s/*" % lang))
    intl["zh"] = fortune_lines(["/usr/share/games/fortunes/" + f for f in ("chinese", "tang300", "song100")])
    if len(gloss) < 1000 or len(en) < 1000:
        sys.exit("make_fixture: install wordnet-base and fortunes (apt-get install wordnet-base fortunes ...)")
    corpus, sections = [], {}

    def add(name, lines):
        sections[name] = (len(corpus), len(corpus) + len(lines))
        corpus.extend(lines)

    add("wordnet", sample(gloss, 4000))
    add("fortunes", sample(en, 2500))
    for lang, lines in intl.items():
        if not lines:
            sys.exit("make_fixture: no fortunes for %s: apt-get install fortunes-%s" % (lang, lang))
        add("fortunes-" + lang, sample(lines, 400))
    words = [w for g in sample(gloss, 3000) for w in g.decode().split()]
    # long: several glosses and fortunes joined, most over 256 tokens
    add("long", [b" ".join(rng.choice(gloss + en) for _ in range(rng.randint(10, 40))) for _ in range(120)])
    add("adversarial", adversarial(words))
    add("sweep", sweep())
    assert all(b"\n" not in c for c in corpus)
    texts = [c.decode("utf-8", "replace") for c in corpus]

    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    enc = tok.encode_batch(texts)
    ids = [e.ids for e in enc]
    assert all(max(i) < 65536 for i in ids)

    # Cross-check: sentence-transformers' own tokenize() gives the same ids (it strips the text and pads).
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(MODEL, device="cpu")
    assert model.max_seq_length == MAX_TOKENS, model.max_seq_length
    for i in range(0, len(texts), 512):
        f = model.tokenize(texts[i:i + 512])  # deprecated alias of preprocess() in 6.x, still the same path
        for j, row in enumerate(f["input_ids"].tolist()):
            n = int(f["attention_mask"][j].sum())
            assert row[:n] == ids[i + j], (i + j, texts[i + j][:80])

    os.makedirs(OUT, exist_ok=True)
    with gzip.GzipFile(os.path.join(OUT, "embed_corpus.txt.gz"), "wb", compresslevel=9, mtime=0) as f:
        f.write(b"\n".join(corpus) + b"\n")
    with gzip.GzipFile(os.path.join(OUT, "embed_corpus_ids.bin.gz"), "wb", compresslevel=9, mtime=0) as f:
        f.write(b"VATOKID1" + struct.pack("<I", len(ids)))
        for row in ids:
            f.write(struct.pack("<H%dH" % len(row), len(row), *row))

    # Embedding reference: 200 lines spread over every kind of line, the empty one included.
    # 200 lines: 10 from each section but the sweep, 10 long ones, the empty line, the rest spread out.
    picks = set()
    for name, (a, b) in sections.items():
        if name != "sweep":
            picks |= set(sample(list(range(a, b)), 10))
    picks.add(corpus.index(b""))
    a, b = sections["adversarial"]
    rest = [i for i in sample(list(range(0, a + 1500)), 400) if i not in picks]
    picks = sorted(picks | set(rest[:200 - len(picks)]))
    assert len(picks) == 200
    ref = [corpus[i] for i in picks]
    with open(os.path.join(OUT, "embed_ref.txt"), "wb") as f:
        f.write(b"\n".join(ref) + b"\n")
    emb = model.encode([r.decode("utf-8", "replace") for r in ref], batch_size=32, convert_to_numpy=True)
    with open(os.path.join(OUT, "embed_ref.f32"), "wb") as f:
        f.write(b"VAEMBF32" + struct.pack("<II", emb.shape[0], emb.shape[1]))
        f.write(emb.astype("<f4").tobytes())
    # JSONL twin of reference lines 101..120 for the end-to-end test: other fields, nesting, key orders,
    # and \u escapes (ensure_ascii) on two lines of three.
    import json
    with open(os.path.join(OUT, "embed_small.jsonl"), "w", encoding="utf-8") as f:
        for i, line in enumerate(ref[100:120]):
            t = line.decode("utf-8", "replace")
            rec = ({"id": 100 + i, "meta": {"source": "embed_ref.txt", "tags": ["a", 1, 2.5e3, None, True]}, "text": t}
                   if i % 2 else {"text": t, "id": 100 + i})
            f.write(json.dumps(rec, ensure_ascii=(i % 3 != 0)) + "\n")
    ntok = sum(len(i) for i in ids)
    print("make_fixture: %d corpus lines (%d non-ASCII, %d with ill-formed UTF-8, %d truncated), %d tokens; "
          "%d embedding reference lines (%d over %d tokens)"
          % (len(corpus), sum(1 for c in corpus if re.search(rb"[\x80-\xff]", c)),
             sum(1 for c in corpus if "\ufffd" in c.decode("utf-8", "replace") and b"\xef\xbf\xbd" not in c),
             sum(1 for i in ids if len(i) == MAX_TOKENS), ntok, len(ref),
             sum(1 for i in picks if len(ids[i]) == MAX_TOKENS), MAX_TOKENS - 1))


if __name__ == "__main__":
    main()
