// Decode attention of a grouped-query model over a padded KV cache, fp32 on CPU.
//
// One query token per batch row; each KV head's group of query heads reads that head's keys and
// values once (torch's batched products read them at a third of the memory bandwidth: with 3
// query heads a KV head they are 3-row GEMMs, docs/llm.md). Built at run time by
// agents/llm/decode_kernel.py; its contract is stated there.
//
//   query (B, H, D) contiguous; key, value (B, KV, L, D) with unit stride in D (views of the
//   engine's growing buffers, read in place); keep (B, L) bool with unit stride in L, or empty
//   for no mask; returns (B, 1, H, D) like transformers' attention functions.

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace {

// A masked row's score: exp(MASKED - max) underflows to 0 (no infinities: the file is built
// with -ffast-math, which assumes there are none).
constexpr float MASKED = -1e30f;

// Scaled scores of one KV head's G query heads against its key rows [0, L); MASKED where keep
// is false, without reading those keys (a batch's holes hold nothing the row attends to).
void scores_of_head(const float* q, const float* k, int64_t k_row, const bool* keep, int64_t L,
                    int64_t D, int64_t G, float scale, float* scores) {
#ifdef __AVX512F__
  if (D == 64) {
    for (int64_t l = 0; l < L; ++l) {
      if (keep && !keep[l]) {  // a hole: its key is never read
        for (int64_t g = 0; g < G; ++g) scores[g * L + l] = MASKED;
        continue;
      }
      const float* kr = k + l * k_row;
      const __m512 k0 = _mm512_loadu_ps(kr), k1 = _mm512_loadu_ps(kr + 16),
                   k2 = _mm512_loadu_ps(kr + 32), k3 = _mm512_loadu_ps(kr + 48);
      for (int64_t g = 0; g < G; ++g) {
        const float* qg = q + g * D;
        __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qg), k0);
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(qg + 16), k1, acc);
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(qg + 32), k2, acc);
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(qg + 48), k3, acc);
        scores[g * L + l] = _mm512_reduce_add_ps(acc) * scale;
      }
    }
    return;
  }
#endif
  for (int64_t l = 0; l < L; ++l) {
    const float* kr = k + l * k_row;
    const bool kept = !keep || keep[l];
    for (int64_t g = 0; g < G; ++g) {
      if (!kept) {
        scores[g * L + l] = MASKED;
        continue;
      }
      const float* qg = q + g * D;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t d = 0; d < D; ++d) s += qg[d] * kr[d];
      scores[g * L + l] = s * scale;
    }
  }
}

// Softmax of each query head's scores, in place (the loops vectorise, exp included). A head
// whose rows are all masked (a finished game's padding row) gets probabilities 0 and so an
// output of 0, not NaN.
void softmax_rows(int64_t L, int64_t G, float* scores) {
  for (int64_t g = 0; g < G; ++g) {
    float* s = scores + g * L;
    float top = MASKED;
    for (int64_t l = 0; l < L; ++l) top = std::max(top, s[l]);
    if (top <= MASKED) {
      std::fill(s, s + L, 0.f);
      continue;
    }
    float total = 0.f;
    for (int64_t l = 0; l < L; ++l) {
      s[l] = std::exp(s[l] - top);
      total += s[l];
    }
    const float inv = 1.f / total;
    for (int64_t l = 0; l < L; ++l) s[l] *= inv;
  }
}

// out[g] = sum_l probs[g][l] * v[l] for the G query heads of one KV head, kept rows only.
void weighted_values(const float* probs, const float* v, int64_t v_row, const bool* keep,
                     int64_t L, int64_t D, int64_t G, float* out, int64_t out_row) {
#ifdef __AVX512F__
  if (D == 64 && G == 3) {
    // 3 heads x 4 vectors of 16 accumulators, all in registers (the loops unroll at -O3).
    __m512 a[12];
    for (auto& r : a) r = _mm512_setzero_ps();
    for (int64_t l = 0; l < L; ++l) {
      if (keep && !keep[l]) continue;  // probability 0: the value is never read
      const float* vr = v + l * v_row;
      __m512 row[4];
      for (int c = 0; c < 4; ++c) row[c] = _mm512_loadu_ps(vr + c * 16);
      for (int g = 0; g < 3; ++g) {
        const __m512 w = _mm512_set1_ps(probs[g * L + l]);
        for (int c = 0; c < 4; ++c) a[g * 4 + c] = _mm512_fmadd_ps(w, row[c], a[g * 4 + c]);
      }
    }
    for (int64_t g = 0; g < 3; ++g)
      for (int64_t c = 0; c < 4; ++c) _mm512_storeu_ps(out + g * out_row + c * 16, a[g * 4 + c]);
    return;
  }
#endif
  for (int64_t g = 0; g < G; ++g) std::fill(out + g * out_row, out + g * out_row + D, 0.f);
  for (int64_t l = 0; l < L; ++l) {
    if (keep && !keep[l]) continue;
    const float* vr = v + l * v_row;
    for (int64_t g = 0; g < G; ++g) {
      const float p = probs[g * L + l];
      float* o = out + g * out_row;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) o[d] += p * vr[d];
    }
  }
}

}  // namespace

torch::Tensor decode_attention(torch::Tensor query, torch::Tensor key, torch::Tensor value,
                               torch::Tensor keep, double scale) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 4 && value.dim() == 4, "query (B,H,D), key/value (B,KV,L,D)");
  TORCH_CHECK(query.scalar_type() == at::kFloat && key.scalar_type() == at::kFloat &&
                  value.scalar_type() == at::kFloat,
              "fp32 only");
  TORCH_CHECK(key.stride(3) == 1 && value.stride(3) == 1, "keys and values need unit stride in D");
  const int64_t B = key.size(0), KV = key.size(1), L = key.size(2), D = key.size(3);
  const int64_t H = query.size(1);
  TORCH_CHECK(query.size(0) == B && query.size(2) == D && H % KV == 0, "query/key shapes differ");
  TORCH_CHECK(value.size(0) == B && value.size(1) == KV && value.size(2) == L && value.size(3) == D,
              "value/key shapes differ");
  const int64_t G = H / KV;
  const bool masked = keep.defined() && keep.numel() > 0;
  if (masked) {
    TORCH_CHECK(keep.scalar_type() == at::kBool && keep.dim() == 2 && keep.size(0) == B &&
                    keep.size(1) == L && keep.stride(1) == 1,
                "keep must be (B, L) bool with unit stride in L");
  }
  auto q = query.contiguous();
  auto out = torch::empty({B, 1, H, D}, query.options());
  const float* qp = q.data_ptr<float>();
  const float* kp = key.data_ptr<float>();
  const float* vp = value.data_ptr<float>();
  const bool* mp = masked ? keep.data_ptr<bool>() : nullptr;
  const int64_t m_row = masked ? keep.stride(0) : 0;
  float* op = out.data_ptr<float>();
  const float fscale = static_cast<float>(scale);
  at::parallel_for(0, B * KV, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(G * L);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / KV, h = task % KV;
      const float* kb = kp + b * key.stride(0) + h * key.stride(1);
      const float* vb = vp + b * value.stride(0) + h * value.stride(1);
      const bool* keep_row = mp ? mp + b * m_row : nullptr;
      scores_of_head(qp + (b * H + h * G) * D, kb, key.stride(2), keep_row, L, D, G, fscale,
                     scores.data());
      softmax_rows(L, G, scores.data());
      weighted_values(scores.data(), vb, value.stride(2), keep_row, L, D, G,
                      op + (b * H + h * G) * D, D);
    }
  });
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_attention", &decode_attention, "Grouped-query decode attention (fp32, CPU)");
}
