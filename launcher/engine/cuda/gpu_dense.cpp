// DLH — the GPU dense layer (see gpu_dense.hpp).
#include "launcher/engine/cuda/gpu_dense.hpp"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "launcher/engine/cuda/kernels.hpp"

namespace dlh {
namespace cuda {
namespace {

float* Lookup(const PointerMap& map, const std::string& name) {
  auto it = map.find(name);
  if (it == map.end()) throw Error(std::string("dense: no device array '") + name + "'");
  return it->second;
}

// The largest power of two, at most 256, that divides every address: the alignment
// cuBLASLt's heuristic must be told (it assumes 256), since an algorithm chosen for a wider
// one may use vector loads that fault on a narrower.
unsigned CommonAlignment(std::initializer_list<const void*> pointers) {
  uintptr_t bits = 256;
  for (const void* p : pointers) bits |= reinterpret_cast<uintptr_t>(p);
  return unsigned(bits & (~bits + 1));  // the lowest set bit
}

template <typename T>
void SetMatmulAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t what,
                        const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, what, &value, sizeof value));
}

// A column-major fp32 rows x cols matrix with leading dimension ld.
MatrixLayout MakeLayout(int rows, int cols, int ld) {
  cublasLtMatrixLayout_t l = nullptr;
  CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, uint64_t(rows), uint64_t(cols), int64_t(ld)));
  return MatrixLayout(l);
}

// One GEMM in cuBLASLt's column-major terms, D (m x n) = op(A) (m x k) * op(B) (k x n),
// with a bias epilogue: BIAS adds bias[m] to every column of D; BGRADB writes to bias[n]
// the sums of op(B)'s columns over k.
struct LtGemmShape {
  cublasOperation_t trans_a, trans_b;
  int m, n, k, lda, ldb, ldd;
  cublasLtEpilogue_t epilogue;
};

// A GEMM's descriptors and the one algorithm cuBLASLt's heuristic gave for them. Chosen
// once and kept: the same algorithm every step keeps the bits the same run to run (a
// BGRADB reduction's order is fixed per algorithm), as PickAlgo does for cuDNN.
struct LtGemm {
  MatmulDesc desc;
  MatrixLayout a, b, d;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool usable = false;  // false: no algorithm for this shape and epilogue
};

// cuBLASLt's scratch: what NVIDIA suggests for Hopper, within the engine's limit.
constexpr size_t kLtWorkspace = size_t(32) << 20;

}  // namespace

size_t DenseWorkspaceBytes(const GpuContext& c) {
  return std::min(c.workspace_limit, kLtWorkspace);
}

namespace {

LtGemm PlanLtGemm(GpuContext* c, const LtGemmShape& s, const void* bias, unsigned alignment) {
  LtGemm g;
  cublasLtMatmulDesc_t desc = nullptr;
  // Plain fp32 arithmetic, as cublasSgemm's default math and the CPU engine, unless the spec
  // allows TF32 for GEMMs ("tf32": "all"). The bias has D's type, fp32, by default.
  CUBLAS_CHECK(cublasLtMatmulDescCreate(
      &desc, c->tf32_gemms ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  g.desc = MatmulDesc(desc);
  SetMatmulAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(s.trans_a));
  SetMatmulAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(s.trans_b));
  SetMatmulAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(s.epilogue));
  // The heuristic reads the bias pointer's value for its alignment.
  SetMatmulAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  g.a = s.trans_a == CUBLAS_OP_N ? MakeLayout(s.m, s.k, s.lda) : MakeLayout(s.k, s.m, s.lda);
  g.b = s.trans_b == CUBLAS_OP_N ? MakeLayout(s.k, s.n, s.ldb) : MakeLayout(s.n, s.k, s.ldb);
  g.d = MakeLayout(s.m, s.n, s.ldd);

  cublasLtMatmulPreference_t p = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
  MatmulPreference pref(p);
  const uint64_t limit = DenseWorkspaceBytes(*c);
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &limit, sizeof limit));
  const uint32_t align = alignment;
  for (auto what :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, what, &align, sizeof align));

  constexpr int kAsk = 8;
  cublasLtMatmulHeuristicResult_t found[kAsk] = {};
  int got = 0;
  // C is D (beta is 0). NOT_SUPPORTED: no algorithm has this epilogue for this shape.
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      c->cublaslt, desc, g.a.get(), g.b.get(), g.d.get(), g.d.get(), p, kAsk, found, &got);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return g;
  CUBLAS_CHECK(status);
  for (int i = 0; i < got && !g.usable; ++i)
    if (found[i].state == CUBLAS_STATUS_SUCCESS && found[i].workspaceSize <= limit) {
      g.algo = found[i].algo;  // the fastest by the heuristic's estimate
      g.workspace = found[i].workspaceSize;
      g.usable = true;
    }
  if (g.usable) GrowWorkspace(c, g.workspace);
  return g;
}

void RunLtGemm(GpuContext* c, const LtGemm& g, const float* a, const float* b, float* d,
               const void* bias) {
  // Set on every call, so that a layer bound again to other arrays cannot use a stale
  // pointer (the plan's alignment was checked by the caller).
  SetMatmulAttribute(g.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float one = 1, zero = 0;
  CUBLAS_CHECK(cublasLtMatmul(c->cublaslt, g.desc.get(), &one, a, g.a.get(), b, g.b.get(), &zero, d,
                              g.d.get(), d, g.d.get(), &g.algo, c->workspace->get(), g.workspace,
                              c->stream));
}

// y (n x units) = x (n x in) W^T + b with W row-major units x in. cuBLAS is column-major,
// where the same memory holds W^T (in x units) and x^T (in x n): y^T = op_T(W^T) x^T.
//
// The bias rides on cuBLASLt epilogues: forward adds it in the GEMM (BIAS), backward takes
// its gradient from the weight-gradient GEMM (BGRADB: there dy is operand B and the bias
// gradient its sums over the batch, GEMM dimension k). Where cuBLASLt has no such
// algorithm for a shape, or the context turns fusion off, the plain cuBLAS GEMMs run with
// a separate bias kernel and a GEMV against ones; results agree to fp32 rounding.
//
// In bf16 (bf16.hpp) the GEMMs take bf16 copies of x, W and dy and write fp32 (cuBLAS
// accumulates in fp32); the bias runs unfused, its gradient from the fp32 dy.
class GpuDense : public GpuLayer {
 public:
  GpuDense(const Shape3& in, const Shape3& out, GpuContext* c)
      : in_features_(int(in.elements())), units_(out.channels), c_(c) {}
  void bind(const PointerMap& values, const PointerMap& grads, const PointerMap&) override {
    w_ = Lookup(values, "weight");
    b_ = Lookup(values, "bias");
    dw_ = Lookup(grads, "weight");
    db_ = Lookup(grads, "bias");
  }
  void plan(int n) override {
    if (c_->bf16) GrowTransient(c_, TransientBytes({in_count(n), out_count(n), weights()}));
  }
  void forward(const float* x, float* y, int n, const ForwardContext&) override {
    if (n == 0) return;
    if (c_->bf16) {
      const std::vector<bf16*> t = CarveTransient(c_, {in_count(n), weights()});
      ToBf16(x, t[0], in_count(n), c_->stream);
      ToBf16(w_, t[1], weights(), c_->stream);
      Gemm(CUBLAS_OP_T, CUBLAS_OP_N, units_, n, in_features_, t[1], in_features_, t[0],
           in_features_, y, units_, true);
      AddBias(y, b_, n, units_, c_->stream);
      ++c_->dense_bias_unfused;
      return;
    }
    const LtGemmShape shape{CUBLAS_OP_T,           CUBLAS_OP_N,  units_,       n,
                            in_features_,          in_features_, in_features_, units_,
                            CUBLASLT_EPILOGUE_BIAS};
    if (const LtGemm* g = plan(&forward_, n, shape, {w_, x, y, b_}, b_)) {
      RunLtGemm(c_, *g, w_, x, y, b_);
      ++c_->dense_bias_fused;
      return;
    }
    Gemm(CUBLAS_OP_T, CUBLAS_OP_N, units_, n, in_features_, w_, in_features_, x, in_features_, y,
         units_, false);
    AddBias(y, b_, n, units_, c_->stream);
    ++c_->dense_bias_unfused;
  }
  void backward(const float* x, const float*, const float* dy, float* dx, int n) override {
    const float one = 1, zero = 0;
    if (n == 0) {
      Fill(dw_, 0, weights(), c_->stream);
      Fill(db_, 0, size_t(units_), c_->stream);
      return;
    }
    if (c_->bf16) {
      const std::vector<bf16*> t = CarveTransient(c_, {in_count(n), out_count(n), weights()});
      ToBf16(x, t[0], in_count(n), c_->stream);
      ToBf16(dy, t[1], out_count(n), c_->stream);
      Gemm(CUBLAS_OP_N, CUBLAS_OP_T, in_features_, units_, n, t[0], in_features_, t[1], units_, dw_,
           in_features_, true);
      CUBLAS_CHECK(cublasSgemv(c_->cublas, CUBLAS_OP_N, units_, n, &one, dy, units_, c_->ones, 1,
                               &zero, db_, 1));
      ++c_->dense_bias_unfused;
      if (dx != nullptr) {
        MarkPass(c_, "backward-data");
        ToBf16(w_, t[2], weights(), c_->stream);
        Gemm(CUBLAS_OP_N, CUBLAS_OP_N, in_features_, n, units_, t[2], in_features_, t[1], units_,
             dx, in_features_, true);
      }
      return;
    }
    // dW^T (in x units) = x^T (in x n) * dy (n x units); db = the column sums of dy (n x
    // units), fused (BGRADB) or as dy^T * ones.
    const LtGemmShape shape{CUBLAS_OP_N,
                            CUBLAS_OP_T,
                            in_features_,
                            units_,
                            n,
                            in_features_,
                            units_,
                            in_features_,
                            CUBLASLT_EPILOGUE_BGRADB};
    if (const LtGemm* g = plan(&backward_, n, shape, {x, dy, dw_, db_}, db_)) {
      RunLtGemm(c_, *g, x, dy, dw_, db_);
      ++c_->dense_bias_fused;
    } else {
      Gemm(CUBLAS_OP_N, CUBLAS_OP_T, in_features_, units_, n, x, in_features_, dy, units_, dw_,
           in_features_, false);
      CUBLAS_CHECK(cublasSgemv(c_->cublas, CUBLAS_OP_N, units_, n, &one, dy, units_, c_->ones, 1,
                               &zero, db_, 1));
      ++c_->dense_bias_unfused;
    }
    // dx^T (in x n) = W^T (in x units) * dy^T (units x n).
    if (dx == nullptr) return;
    MarkPass(c_, "backward-data");
    Gemm(CUBLAS_OP_N, CUBLAS_OP_N, in_features_, n, units_, w_, in_features_, dy, units_, dx,
         in_features_, false);
  }

  std::vector<PassChoice> choices(int n) const override {
    const std::string math = c_->bf16 ? "bf16" : c_->tf32_gemms ? "tf32" : "fp32";
    // The plan of batch n that a step used (at the alignment its arrays had), if fused.
    auto fused = [n](const Plans& plans) -> const LtGemm* {
      for (const auto& [key, g] : plans)
        if (key.first == n && g.usable) return &g;
      return nullptr;
    };
    const LtGemm* f = c_->bf16 ? nullptr : fused(forward_);
    const LtGemm* b = c_->bf16 ? nullptr : fused(backward_);
    return {{"forward", f ? "cuBLASLt matmul, bias epilogue" : "cuBLAS GEMM, bias kernel", math,
             f ? f->workspace : 0},
            {"backward-weights",
             b ? "cuBLASLt matmul, bias-gradient epilogue" : "cuBLAS GEMM, bias GEMV", math,
             b ? b->workspace : 0},
            {"backward-data", "cuBLAS GEMM", math, 0}};
  }

 private:
  size_t weights() const { return size_t(units_) * size_t(in_features_); }
  size_t in_count(int n) const { return size_t(n) * size_t(in_features_); }
  size_t out_count(int n) const { return size_t(n) * size_t(units_); }

  // c (fp32, column-major m x n) = op(a) op(b) with cuBLAS: a and b bf16 (`bf16_operands`,
  // fp32 accumulation), or fp32 in plain fp32 (cublasSgemm, the checked path) or TF32
  // ("tf32": "all").
  void Gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda,
            const void* b, int ldb, float* c, int ldc, bool bf16_operands) {
    const float one = 1, zero = 0;
    if (bf16_operands)
      CUBLAS_CHECK(cublasGemmEx(c_->cublas, ta, tb, m, n, k, &one, a, CUDA_R_16BF, lda, b,
                                CUDA_R_16BF, ldb, &zero, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    else if (c_->tf32_gemms)
      CUBLAS_CHECK(cublasGemmEx(c_->cublas, ta, tb, m, n, k, &one, a, CUDA_R_32F, lda, b,
                                CUDA_R_32F, ldb, &zero, c, CUDA_R_32F, ldc,
                                CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    else
      CUBLAS_CHECK(cublasSgemm(c_->cublas, ta, tb, m, n, k, &one, static_cast<const float*>(a), lda,
                               static_cast<const float*>(b), ldb, &zero, c, ldc));
  }

  // Plans by batch size (training and evaluation batches differ) and by the alignment of
  // the arrays (each plan holds for the alignment it was chosen for).
  using Plans = std::map<std::pair<int, unsigned>, LtGemm>;

  // The plan for batch n, made on first use; null when fusion is off or cuBLASLt has no
  // algorithm for it (the caller runs the unfused path).
  const LtGemm* plan(Plans* plans, int n, const LtGemmShape& shape,
                     std::initializer_list<const void*> arrays, const void* bias) {
    if (!c_->fuse_dense_bias || c_->cublaslt == nullptr) return nullptr;
    const unsigned alignment = CommonAlignment(arrays);
    const auto key = std::make_pair(n, alignment);
    auto it = plans->find(key);
    if (it == plans->end()) it = plans->emplace(key, PlanLtGemm(c_, shape, bias, alignment)).first;
    return it->second.usable ? &it->second : nullptr;
  }

  int in_features_, units_;
  GpuContext* c_;
  Plans forward_, backward_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuLayer> MakeGpuDense(const Shape3& in, const Shape3& out, GpuContext* context) {
  return std::make_unique<GpuDense>(in, out, context);
}

}  // namespace cuda
}  // namespace dlh
