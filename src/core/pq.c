/* pq.c: residual product-quantization codebooks trained by the annealing loop (core/pq.h). */
#include "core/pq.h"

#include <stdio.h>
#include <string.h>

#include "core/anneal.h"
#include "util/util.h"

double va_pq_bytes_per_vector(int64_t M, int64_t bits) { return (double)M * (double)bits / 8.0 + 4.0; }

void va_pq_config(const va_config_t *job, int64_t m, va_config_t *out) {
  *out = *job;
  out->k = (int64_t)1 << job->pq_bits;
  out->seed = job->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(m + 1));
  snprintf(out->init, sizeof out->init, "kmeans||");
  out->init_kind = VA_INIT_KMEANSPP;
  out->robust = VA_ROBUST_NONE;
  /* eta(T) = lr T / (1 + T) = 1 at T = 1: each anchor moves onto its members' mean, a Lloyd step */
  out->lr = 2.0;
  out->T0 = 1.0;
  out->cooling_rate = 0.0;
  out->momentum = 0.0;
  out->max_step = 0.0;
  out->max_iter = job->pq_iters;
  out->tol = 1e-4;
  out->tol_mode = VA_TOL_RELATIVE;
  out->min_changes = -1;
  out->maintenance_interval = 0;
  out->k_min = 0;
  out->k_max = 0;
  out->progress_every = 0;
  out->checkpoint_every = 0;
}

void va_pq_train_codebook(const va_config_t *cfg, const va_backend_t *be, const va_assign_opts_t *aopts, float *X,
                          int64_t n, int64_t row0, int64_t n_local, int64_t width, int64_t dmax, float *codebook,
                          va_pq_trained_t *out) {
  va_state_t st;
  memset(&st, 0, sizeof st);
  st.cfg = cfg;
  st.n = n;
  st.d = width;
  st.n_local = n_local;
  st.row0 = row0;
  st.X = X;
  st.center = va_calloc((size_t)width, sizeof(double), "pq centre"); /* the residuals' frame is the job's */
  st.k = st.k_initial = cfg->k;
  st.aopts = *aopts;
  st.be = be;
  va_state_alloc(&st);
  va_init_anchors(&st);
  va_anneal(&st);
  va_anneal_anchors_to_host(&st);
  for (int64_t c = 0; c < st.k; c++) {
    memcpy(codebook + c * dmax, st.A + c * width, (size_t)width * sizeof(float));
    memset(codebook + c * dmax + width, 0, (size_t)(dmax - width) * sizeof(float));
  }
  out->iterations = st.iter;
  out->converged = st.converged;
  out->energy = st.E;
  va_state_free(&st);
}
