/* index_add.c: writes an index with rows added (io/index_add.h). The old index is copied object by
 * object (datasets read whole and written from rank 0's copy, attributes with their own types, groups
 * with their attributes' creation order), except what adding rows changes: /assignments (old ++ new),
 * /anchor_count, /anchor_mse, the root attributes n, final_energy, distortion and compression_ratio,
 * /pq/codes (old ++ new, each rank writing its blocks as compress writes its own) and the /pq attributes
 * anchor_error and error, and /sources, which gains one entry for the input (and, for an index that had
 * none, one for the rows compress read, from the root's source_* attributes). */
#include "io/index_add.h"

#include <stdlib.h>
#include <string.h>

#include "io/h5io.h"
#include "io/index.h" /* va_index_attr_*, va_index_dataset, va_index_write_1d */
#include "util/util.h"

/* Objects and attributes written anew rather than copied: at the root, and in /pq (compress --codes pq),
 * whose codebooks and other figures stay as they are. */
static const char *const new_root_objects[] = {"assignments", "anchor_count", "anchor_mse", "pq", NULL};
static const char *const new_root_attrs[] = {"n", "final_energy", "distortion", "compression_ratio", NULL};
static const char *const new_pq_objects[] = {"codes", NULL};
static const char *const new_pq_attrs[] = {"anchor_error", "error", NULL};

static int listed(const char *name, const char *const *list) {
  for (; list && *list; list++)
    if (!strcmp(name, *list)) return 1;
  return 0;
}

/* One attribute of src (any type, any shape) to dst under the name as. */
static void copy_attr_as(hid_t src, const char *name, hid_t dst, const char *as) {
  hid_t a = VA_H5(H5Aopen(src, name, H5P_DEFAULT)), t = VA_H5(H5Aget_type(a)), sp = VA_H5(H5Aget_space(a));
  const hssize_t npts = H5Sget_simple_extent_npoints(sp);
  const size_t size = H5Tget_size(t);
  void *buf = va_calloc((size_t)(npts > 0 ? npts : 1), size > 0 ? size : 1, "index attribute");
  VA_H5(H5Aread(a, t, buf));
  hid_t b = VA_H5(H5Acreate2(dst, as, t, sp, H5P_DEFAULT, H5P_DEFAULT));
  VA_H5(H5Awrite(b, t, buf));
  VA_H5(H5Aclose(b));
  if (H5Tis_variable_str(t) > 0 || H5Tdetect_class(t, H5T_VLEN) > 0) VA_H5(H5Dvlen_reclaim(t, sp, H5P_DEFAULT, buf));
  free(buf);
  VA_H5(H5Sclose(sp));
  VA_H5(H5Tclose(t));
  VA_H5(H5Aclose(a));
}

typedef struct {
  hid_t dst;
  const char *const *skip;
} attr_copy_t;

static herr_t copy_attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *ctx) {
  (void)info;
  const attr_copy_t *c = ctx;
  if (!listed(name, c->skip)) copy_attr_as(loc, name, c->dst, name);
  return 0;
}

/* Every attribute of src to dst but those in skip, in creation order where src tracks it (/config:
 * the key table's order), else by name. */
static void copy_attrs(hid_t src, hid_t dst, const char *const *skip) {
  attr_copy_t c = {dst, skip};
  unsigned order = 0;
  if (H5Iget_type(src) == H5I_GROUP) {
    hid_t cpl = VA_H5(H5Gget_create_plist(src));
    VA_H5(H5Pget_attr_creation_order(cpl, &order));
    VA_H5(H5Pclose(cpl));
  }
  hsize_t idx = 0;
  VA_H5(H5Aiterate2(src, (order & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME, H5_ITER_INC, &idx,
                    copy_attr_cb, &c));
}

/* A group whose attributes keep their creation order (readers list /config in key table order). */
static hid_t make_group(hid_t loc, const char *name) {
  hid_t gcpl = VA_H5(H5Pcreate(H5P_GROUP_CREATE));
  VA_H5(H5Pset_attr_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  hid_t g = VA_H5(H5Gcreate2(loc, name, H5P_DEFAULT, gcpl, H5P_DEFAULT));
  VA_H5(H5Pclose(gcpl));
  return g;
}

static void copy_dataset(hid_t src, const char *name, hid_t dst) {
  hid_t ds = VA_H5(H5Dopen2(src, name, H5P_DEFAULT)), t = VA_H5(H5Dget_type(ds)), sp = VA_H5(H5Dget_space(ds));
  const hssize_t npts = H5Sget_simple_extent_npoints(sp);
  void *buf = va_malloc((size_t)(npts > 0 ? npts : 1) * H5Tget_size(t), "index dataset");
  if (npts > 0) VA_H5(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
  hid_t out = va_h5_create_dataset(dst, name, t, sp, H5P_DEFAULT);
  copy_attrs(ds, out, NULL);
  if (npts > 0) va_h5_write_whole(out, t, buf);
  free(buf);
  VA_H5(H5Dclose(out));
  VA_H5(H5Sclose(sp));
  VA_H5(H5Tclose(t));
  VA_H5(H5Dclose(ds));
}

typedef struct {
  hid_t dst;
  const char *const *skip;
} group_copy_t;

static void copy_group(hid_t src, hid_t dst, const char *const *skip);

static herr_t copy_link_cb(hid_t g, const char *name, const H5L_info_t *info, void *ctx) {
  (void)info;
  const group_copy_t *c = ctx;
  if (listed(name, c->skip)) return 0;
  hid_t o = VA_H5(H5Oopen(g, name, H5P_DEFAULT));
  const H5I_type_t type = H5Iget_type(o);
  if (type == H5I_GROUP) {
    hid_t out = make_group(c->dst, name);
    copy_attrs(o, out, NULL);
    copy_group(o, out, NULL);
    VA_H5(H5Gclose(out));
  } else if (type == H5I_DATASET) {
    copy_dataset(g, name, c->dst);
  }
  VA_H5(H5Oclose(o));
  return 0;
}

/* Every object of src to dst but those named in skip. */
static void copy_group(hid_t src, hid_t dst, const char *const *skip) {
  group_copy_t c = {dst, skip};
  hsize_t idx = 0;
  VA_H5(H5Literate(src, H5_INDEX_NAME, H5_ITER_INC, &idx, copy_link_cb, &c));
}

/* /sources/<m>: one source of rows and where its rows are in /assignments. */
static void source_entry(hid_t sources, int64_t m, const char *how, const va_index_source_t *s, int64_t row0,
                         int64_t n) {
  char name[32];
  snprintf(name, sizeof name, "%lld", (long long)m);
  hid_t g = make_group(sources, name);
  va_index_attr_text(g, "how", how);
  va_index_attr_text(g, "file", s->file);
  va_index_attr_text(g, "dataset", s->dataset);
  va_index_attr_text(g, "dtype", s->dtype);
  va_index_attr_i64(g, "size", s->size);
  va_index_attr_u64(g, "checksum", s->checksum);
  va_index_attr_i64(g, "row0", row0);
  va_index_attr_i64(g, "n", n);
  VA_H5(H5Gclose(g));
}

static void added_setup(hid_t f, void *ctx) {
  const va_index_add_t *a = ctx;
  hid_t old = VA_H5(H5Fopen(a->old_path, H5F_ACC_RDONLY, H5P_DEFAULT));
  copy_group(old, f, new_root_objects);
  copy_attrs(old, f, new_root_attrs);
  if (a->pq_m > 0) {
    hid_t old_pq = VA_H5(H5Gopen2(old, "/pq", H5P_DEFAULT)), pq = make_group(f, "/pq");
    copy_attrs(old_pq, pq, new_pq_attrs);
    copy_group(old_pq, pq, new_pq_objects);
    va_index_attr_f64(pq, "anchor_error", a->pq_anchor_error);
    va_index_attr_f64(pq, "error", a->pq_error);
    VA_H5(H5Dclose(va_index_dataset(pq, "codes", H5T_STD_U8LE, 2, a->n_old + a->n_new, a->pq_m,
                                    "code (row of that subspace's codebook) of every source row in every subspace, "
                                    "in /sources order (n x m)",
                                    "code")));
    VA_H5(H5Gclose(pq));
    VA_H5(H5Gclose(old_pq));
  }
  hid_t sources;
  int64_t m = 0;
  if (H5Lexists(f, "/sources", H5P_DEFAULT) > 0) {
    sources = VA_H5(H5Gopen2(f, "/sources", H5P_DEFAULT));
    H5G_info_t gi;
    VA_H5(H5Gget_info(sources, &gi));
    m = (int64_t)gi.nlinks;
  } else {
    /* The rows compress read, as the root records them. */
    sources = make_group(f, "/sources");
    hid_t g = make_group(sources, "0");
    va_index_attr_text(g, "how", "compress");
    static const char *const from[][2] = {{"source_file", "file"},
                                          {"source_dataset", "dataset"},
                                          {"source_dtype", "dtype"},
                                          {"source_size", "size"},
                                          {"source_checksum", "checksum"}};
    for (size_t q = 0; q < sizeof from / sizeof from[0]; q++)
      if (H5Aexists(old, from[q][0]) > 0) copy_attr_as(old, from[q][0], g, from[q][1]);
    va_index_attr_i64(g, "row0", 0);
    va_index_attr_i64(g, "n", a->n_old);
    VA_H5(H5Gclose(g));
    m = 1;
  }
  source_entry(sources, m, "add", &a->source, a->n_old, a->n_new);
  VA_H5(H5Gclose(sources));
  char metric[32] = "l2";
  va_h5_attr_read_str(old, "metric", metric, sizeof metric);
  const int is_cosine = !strcmp(metric, "cosine");
  VA_H5(H5Fclose(old));
  VA_H5(H5Dclose(va_index_dataset(f, "/assignments", H5T_STD_U32LE, 1, a->n_old + a->n_new, 0,
                                  "anchor id (row of /anchors) of every source row, in /sources order", "anchor id")));
  va_index_write_1d(f, "/anchor_count", H5T_STD_U64LE, H5T_NATIVE_UINT64, a->k, a->counts,
                    "source rows assigned to each anchor", "rows");
  va_index_write_1d(f, "/anchor_mse", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, a->k, a->mse,
                    is_cosine ? "mean of 1 - x.a over each anchor's members (0 when it has none)"
                              : "mean squared distance of each anchor's members to it (0 when it has none)",
                    is_cosine ? "1" : "source^2");
  va_index_attr_i64(f, "n", a->n_old + a->n_new);
  va_index_attr_f64(f, "final_energy", a->final_energy);
  va_index_attr_f64(f, "distortion", a->distortion);
  va_index_attr_f64(f, "compression_ratio", a->ratio);
}

static void added_rows(hid_t f, void *ctx) {
  const va_index_add_t *a = ctx;
  hid_t ds = VA_H5(H5Dopen2(f, "/assignments", H5P_DEFAULT));
  va_h5_write_block(ds, H5T_NATIVE_UINT32, a->old_row0, a->old_n_local, 1, sizeof(uint32_t), a->old_assign);
  va_h5_write_block(ds, H5T_NATIVE_UINT32, a->n_old + a->new_row0, a->new_n_local, 1, sizeof(uint32_t), a->new_assign);
  VA_H5(H5Dclose(ds));
  if (a->pq_m > 0) {
    ds = VA_H5(H5Dopen2(f, "/pq/codes", H5P_DEFAULT));
    va_h5_write_block(ds, H5T_NATIVE_UINT8, a->old_row0, a->old_n_local, a->pq_m, (size_t)a->pq_m, a->old_codes);
    va_h5_write_block(ds, H5T_NATIVE_UINT8, a->n_old + a->new_row0, a->new_n_local, a->pq_m, (size_t)a->pq_m,
                      a->new_codes);
    VA_H5(H5Dclose(ds));
  }
}

int va_index_write_added(const char *path, const va_index_add_t *a, int io_mode) {
  return va_h5_write_file("index", path, a->bytes, io_mode, added_setup, added_rows, (void *)a);
}

/* Rank 0: the figures of /pq; 0 or VA_EXIT_INPUT with err set. */
static int read_code_errors(const char *path, va_index_code_errors_t *out, char *err, size_t len) {
  err[0] = '\0';
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return snprintf(err, len, "cannot open index '%s': %s", path, va_h5_last_error()), VA_EXIT_INPUT;
  const char *const names[] = {"variance", "anchor_error", "error"};
  double *const into[] = {&out->variance, &out->anchor_error, &out->error};
  for (int q = 0; q < 3 && !err[0]; q++) {
    if (H5Aexists_by_name(f, "/pq", names[q], H5P_DEFAULT) <= 0) {
      snprintf(err, len, "index '%s' is damaged: its codes (/pq) lack the attribute %s; compress it again", path,
               names[q]);
      break;
    }
    hid_t at = H5Aopen_by_name(f, "/pq", names[q], H5P_DEFAULT, H5P_DEFAULT);
    if (at < 0 || H5Aread(at, H5T_NATIVE_DOUBLE, into[q]) < 0)
      snprintf(err, len, "index '%s' is damaged: the attribute %s of its codes (/pq) does not read (%s)", path,
               names[q], va_h5_last_error());
    if (at >= 0) H5Aclose(at);
  }
  H5Fclose(f);
  return err[0] ? VA_EXIT_INPUT : 0;
}

int va_index_read_code_errors(const char *path, va_index_code_errors_t *out) {
  char err[VA_PATH_MAX + 512] = "";
  memset(out, 0, sizeof *out);
  int rc = va_proc.rank == 0 ? read_code_errors(path, out, err, sizeof err) : 0;
  if ((rc = va_agree(rc, err))) return rc;
  VA_MPI(MPI_Bcast(out, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return 0;
}
