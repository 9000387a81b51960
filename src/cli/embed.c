/* embed.c (cli): `vecanneal embed`: its options from argv, then the job (job/embed.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h" /* va_cmd_embed */
#include "cli/options.h"  /* va_opt, va_opt_i64, va_opt_unknown */
#include "job/embed.h"    /* va_embed_options_t, va_embed_job */
#include "util/util.h"    /* va_log0, va_agree */

static void embed_usage(void) {
  va_log0(
      "usage: vecanneal embed --input CORPUS.txt|CORPUS.jsonl --out FILE.h5[:/DATASET] [options]\n"
      "       vecanneal embed --input CORPUS --token-ids-out IDS.h5[:/DATASET] [options]   (tokenize only)\n"
      "Embeds one text per line with all-MiniLM-L6-v2 (384-d, mean pooling, unit length) into FILE.h5:/train\n"
      "(float32, attributes distance = angular and dimension = 384), ready for 'vecanneal compress --input'.\n"
      "Lines are split over the MPI ranks in contiguous blocks; row i of the output is line i of the input.\n"
      "  --input FILE           text, one per line ('\\n'; a final line without '\\n' counts); '.jsonl' files hold\n"
      "                         one JSON object per line with a string field \"text\"\n"
      "  --out FILE.h5[:DSET]   output file (replaced; written to FILE.h5.partial first) and dataset [/train]\n"
      "  --token-ids-out IDS.h5[:DSET]  also write the token ids encoded ([CLS] ... [SEP], after truncation):\n"
      "                         DSET [/ids] int32, every line's ids back to back; beside it 'lengths' (int32)\n"
      "                         and 'offsets' (int64, each line's first id) per line. Without --out: only\n"
      "                         tokenize (no weights read, no encoder)\n"
      "  --model DIR            model directory from scripts/fetch-model [$VECANNEAL_MODEL, else\n"
      "                         ./models/all-MiniLM-L6-v2, else the source tree's models/all-MiniLM-L6-v2]\n"
      "  --weights fp32|fp16    model.safetensors or model-fp16.safetensors (read as fp32 either way) [fp32]\n"
      "  --backend auto|cpu|cuda  encoder: cuda = one GPU per rank (node-local rank modulo the visible devices);\n"
      "                         auto = cuda when this build has it and every rank sees a device [auto]\n"
      "  --precision auto|fp32|fp16|bf16  GPU arithmetic (the CPU encoder is fp32) [auto: fp16 on a GPU]\n"
      "  --batch B              sentences per encoder batch (sorted by length within a rank) [64 CPU, 256 GPU]\n"
      "  --max-tokens N         truncate to N tokens including [CLS] and [SEP], 2..512 [256]\n"
      "  --threads T            threads per rank (tokenizer, BLAS, element-wise loops) [cores / ranks on the node]\n"
      "  --format auto|text|jsonl  input format [auto: jsonl when the name ends in .jsonl]\n"
      "  --metrics FILE.json    timings, throughput, counts and peak memory (max over ranks)\n"
      "  --progress SECONDS     rank-0 progress interval, 0 = off [10]\n"
      "  --io auto|collective|independent  HDF5 transfer mode [auto]\n"
      "An empty line is kept as a row: the embedding of '[CLS] [SEP]'. Over-long lines are truncated and\n"
      "ill-formed UTF-8 is replaced (U+FFFD, which BERT's normaliser drops); both are counted and reported.\n"
      "Exit codes: 0 done, 1 internal/library failure, 2 bad usage, 3 bad input or model, 4 output not writable.\n");
}

static int parse_args(int argc, char **argv, va_embed_options_t *a, char *err, size_t elen, int *help) {
  const char *v;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      *help = 1;
      return 0;
    } else if ((v = va_opt(argc, argv, &i, "--input"))) a->input = v;
    else if ((v = va_opt(argc, argv, &i, "--out"))) a->out_spec = v;
    else if ((v = va_opt(argc, argv, &i, "--token-ids-out"))) a->token_ids_out = v;
    else if ((v = va_opt(argc, argv, &i, "--metrics"))) a->metrics = v;
    else if ((v = va_opt(argc, argv, &i, "--model"))) a->model = v;
    else if ((v = va_opt(argc, argv, &i, "--weights"))) a->weights = v;
    else if ((v = va_opt(argc, argv, &i, "--format"))) a->format = v;
    else if ((v = va_opt(argc, argv, &i, "--io"))) a->io = v;
    else if ((v = va_opt(argc, argv, &i, "--backend"))) a->backend = v;
    else if ((v = va_opt(argc, argv, &i, "--precision"))) a->precision = v;
    else if ((v = va_opt(argc, argv, &i, "--batch"))) {
      int64_t x;
      if (va_opt_i64("embed: --batch", v, 1, 1 << 16, &x, err, elen)) return 1;
      a->batch = (int)x;
    } else if ((v = va_opt(argc, argv, &i, "--max-tokens"))) {
      int64_t x;
      if (va_opt_i64("embed: --max-tokens", v, 2, 512, &x, err, elen)) return 1;
      a->max_tokens = (int)x;
    } else if ((v = va_opt(argc, argv, &i, "--threads"))) {
      int64_t x;
      if (va_opt_i64("embed: --threads", v, 1, 1024, &x, err, elen)) return 1;
      a->threads = (int)x;
    } else if ((v = va_opt(argc, argv, &i, "--progress"))) {
      char *e;
      a->progress = strtod(v, &e);
      if (*e || !(a->progress >= 0)) {
        snprintf(err, elen, "embed: --progress: expected seconds >= 0, got '%s'", v);
        return 1;
      }
    } else {
      va_opt_unknown("embed", argv[i], err, elen);
      return 1;
    }
  }
  return 0;
}

int va_cmd_embed(int argc, char **argv) {
  va_embed_options_t o;
  va_embed_options_default(&o);
  char err[1024] = "";
  int help = 0;
  int bad = parse_args(argc, argv, &o, err, sizeof err, &help);
  if (help) {
    embed_usage();
    return 0;
  }
  if (!bad) bad = va_embed_options_resolve(&o, err, sizeof err);
  if (va_agree(bad ? VA_EXIT_USAGE : 0, err)) return VA_EXIT_USAGE;
  return va_embed_job(&o);
}
