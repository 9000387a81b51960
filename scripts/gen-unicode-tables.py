#!/usr/bin/env python3
"""gen-unicode-tables.py: writes src/embed/unicode_tables.c, the per-code-point data behind the C BERT
tokenizer (src/embed/tokenizer.c). Run once; the generated file is committed.

Why the `tokenizers` package and not only unicodedata: the reference tokenizer of all-MiniLM-L6-v2 is
Hugging Face's Rust BertNormalizer + BertPreTokenizer, whose category tables are older than Python's
unicodedata (Unicode 14 in Python 3.11): it keeps unassigned (Cn) code points instead of dropping them as
"control", does not strip combining marks (Mn) or split punctuation (P*) added in later Unicode versions,
and its CJK ranges differ from the Python BasicTokenizer's (0x2B920.. vs 0x2B820..). Token parity needs
its behaviour, so each code point is classified by asking the `tokenizers` package directly (a one-char
string through the normalizer and the pre-tokenizer); unicodedata gives the first guess and the script
reports where the two disagree. Needs: pip install tokenizers (see tests/embed/make_fixture.sh).

Per code point c the table holds one record:
  flags  DROP   removed: clean_text (NUL, U+FFFD, Cc/Cf/Co/Cs except \\t\\n\\r) or a combining mark
                stripped after NFD (per code point the two are indistinguishable)
         SPACE  White_Space, becomes ' '
         CJK    surrounded by spaces (handle_chinese_chars), then mapped
         PUNCT  the pre-tokenizer isolates it (ASCII punctuation or an old-Unicode P* category)
         HANGUL precomposed Hangul syllable: NFD is algorithmic (L V [T] jamo), done in C
  map    lowercase(strip_Mn(NFD(c))): identity, one code point (stored as a delta, so runs like A..Z
         share one record), or a short sequence in a pool.
Storage: records[] (unique), a pool of code points, and a two-level index (stage1[c >> 7] -> block,
stage2[block * 128 + (c & 127)] -> record) with identical blocks shared.
Limitation (documented in docs/embed.md): mapping is per code point, so NFD's canonical reordering of
a run of several non-starters is not reproduced; only the order of surviving non-Mn marks with non-zero
combining class could differ, which the test corpus never shows.

usage: scripts/gen-unicode-tables.py [OUT.c]
"""
import sys
import unicodedata

try:
    import tokenizers
    from tokenizers import normalizers, pre_tokenizers
except ImportError:
    sys.exit("gen-unicode-tables: needs the 'tokenizers' package (pip install tokenizers)")

OUT = sys.argv[1] if len(sys.argv) > 1 else "src/embed/unicode_tables.c"
F_DROP, F_SPACE, F_CJK, F_PUNCT, F_HANGUL = 1, 2, 4, 8, 16
BLOCK = 128
NORM = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
PRE = pre_tokenizers.BertPreTokenizer()
WHITE_SPACE = set([0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000] + list(range(9, 14)) + list(range(0x2000, 0x200B)))
HANGUL_S0, HANGUL_N = 0xAC00, 11172


def guess(c):
    """What Python's unicodedata (current Unicode) says the Rust normalizer should do with c."""
    ch = chr(c)
    if c == 0 or c == 0xFFFD or (unicodedata.category(ch)[0] == "C" and c not in (9, 10, 13)):
        return ""
    if c in WHITE_SPACE:
        return " "
    s = "".join(x for x in unicodedata.normalize("NFD", ch) if unicodedata.category(x) != "Mn").lower()
    return s


def hangul_nfd(c):
    s = c - HANGUL_S0
    out = [0x1100 + s // 588, 0x1161 + (s % 588) // 28]
    if s % 28:
        out.append(0x11A7 + s % 28)
    return "".join(map(chr, out))


def main():
    records, rec_index, pool = [], {}, []
    cps = [0] * 0x110000
    disagree = {"map": 0, "map_cn": 0, "punct": 0}
    for c in range(0x110000):
        if 0xD800 <= c < 0xE000:  # surrogates: never produced by the UTF-8 decoder
            flags, mapping = F_DROP, ""
        else:
            ch = chr(c)
            out = NORM.normalize_str(ch)
            pieces = PRE.pre_tokenize_str("a" + ch + "a")
            punct = len(pieces) == 3 and pieces[1][0] == ch
            g = guess(c)
            if g != out.strip(" ") and not (out == " " and g == " "):
                disagree["map_cn" if unicodedata.category(ch) == "Cn" else "map"] += 1
            cat = unicodedata.category(ch)
            ascii_p = 33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126
            if punct != (ascii_p or cat.startswith("P")):
                disagree["punct"] += 1
            flags = F_PUNCT if punct else 0
            if out == "":
                flags |= F_DROP
                mapping = ""
            elif out == " ":
                flags |= F_SPACE
                mapping = " "
            elif len(out) >= 3 and out[0] == " " and out[-1] == " ":
                flags |= F_CJK
                mapping = out[1:-1]
            else:
                mapping = out
            assert " " not in mapping or flags & F_SPACE, hex(c)
            assert not any(ord(x) in WHITE_SPACE for x in mapping) or flags & F_SPACE, hex(c)
            if HANGUL_S0 <= c < HANGUL_S0 + HANGUL_N:
                assert mapping == hangul_nfd(c) and not flags, hex(c)
                flags, mapping = F_HANGUL, ch
        if len(mapping) == 1 and not flags & F_SPACE:
            rec = (flags, 1, 0, ord(mapping) - c)  # delta form: identity is (flags, 1, 0, 0)
        elif flags & (F_SPACE | F_DROP):
            rec = (flags, 0, 0, 0)
        else:
            seq = [ord(x) for x in mapping]
            # reuse an identical run already in the pool
            key = tuple(seq)
            off = None
            for i in range(len(pool) - len(seq) + 1):
                if tuple(pool[i:i + len(seq)]) == key:
                    off = i
                    break
            if off is None:
                off = len(pool)
                pool.extend(seq)
            rec = (flags, len(seq), off, 0)
        if rec not in rec_index:
            rec_index[rec] = len(records)
            records.append(rec)
        cps[c] = rec_index[rec]

    blocks, block_index, stage1 = [], {}, []
    for b in range(0x110000 // BLOCK):
        blk = tuple(cps[b * BLOCK:(b + 1) * BLOCK])
        if blk not in block_index:
            block_index[blk] = len(blocks)
            blocks.append(blk)
        stage1.append(block_index[blk])
    assert len(records) < 65536 and len(blocks) < 65536 and len(pool) < 65536
    maxlen = max(r[1] for r in records)

    def rows(vals, per=24):
        vals = list(vals)
        return ",\n".join("  " + ",".join(str(v) for v in vals[i:i + per]) for i in range(0, len(vals), per))

    with open(OUT, "w") as f:
        f.write(
            "/* unicode_tables.c: GENERATED by scripts/gen-unicode-tables.py -- do not edit.\n"
            " * Per-code-point behaviour of Hugging Face's BertNormalizer(clean_text, handle_chinese_chars,\n"
            " * lowercase, strip accents) and BertPreTokenizer, as measured on the tokenizers package %s\n"
            " * (Python's unicodedata %s, the first guess, disagreed on %d unassigned code points that the\n"
            " * reference keeps, %d other mappings and %d punctuation flags: its Unicode tables are older).\n"
            " * See the generator for the layout. */\n"
            % (tokenizers.__version__, unicodedata.unidata_version, disagree["map_cn"], disagree["map"], disagree["punct"]))
        f.write('#include "unicode_tables.h"\n\n')
        f.write("const va_uni_rec_t va_uni_records[%d] = {\n" % len(records))
        recs = ["{%d, %d, %d, %d}" % r for r in records]
        f.write(",\n".join("  " + ", ".join(recs[i:i + 6]) for i in range(0, len(recs), 6)))
        f.write("};\n\n")
        f.write("const uint32_t va_uni_pool[%d] = {\n%s};\n\n" % (max(len(pool), 1), rows(pool or [0], 12)))
        f.write("const uint16_t va_uni_stage1[%d] = {\n%s};\n\n" % (len(stage1), rows(stage1)))
        f.write("const uint16_t va_uni_stage2[%d] = {\n%s};\n" % (len(blocks) * BLOCK, rows(v for blk in blocks for v in blk)))
    print("gen-unicode-tables: %s: %d records, %d pool code points, %d blocks of %d, max map length %d; "
          "unicodedata %s disagreed on %d unassigned code points, %d other mappings, %d punctuation flags"
          % (OUT, len(records), len(pool), len(blocks), BLOCK, maxlen, unicodedata.unidata_version,
             disagree["map_cn"], disagree["map"], disagree["punct"]))
    if maxlen > 8:
        sys.exit("gen-unicode-tables: a mapping longer than VA_UNI_MAXMAP (8)")


if __name__ == "__main__":
    main()
