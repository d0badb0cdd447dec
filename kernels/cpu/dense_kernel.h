/* dense_kernel.h: the body of the fast dense-layer kernels (linear_forward and linear_backward), written
 * once and included by one file per instruction set (dense_avx512.c, dense_avx2.c), which first defines:
 *   DK(name)      the instance's name for `name` (a suffix per instruction set)
 *   VL, MR, NVMAX vector lanes, rows per register tile, vectors per register tile row
 *   V, M          the vector and lane-mask types
 *   V_ZERO() V_SET1(x) V_LOAD(p) V_LOADM(p, m) V_STORE(p, v) V_STOREM(p, m, v) V_BCAST(p) V_FMA(a, b, c)
 *   V_ADD(a, b) V_SUB(a, b) V_MUL(a, b) V_RELU(v) V_RELU_GRAD(d, y) V_REDUCE(v) M_TAIL(n) M_FULL
 *
 * Every product here is C[m, n] (+)= sum_p A(i, p) B(p, j) with A read one scalar at a time (broadcast) at
 * any strides and B read as vectors along j (its rows contiguous), the shape of the classic register-tile
 * kernel: a tile of MR rows x NVMAX vectors of C stays in registers while p runs. The three products of a
 * dense layer all fit it without copying, except the forward, which needs W transposed:
 *   forward  y[r, o]  = sum_i x[r, i] W[o, i]     A = x, B = W^T (packed, a panel at a time)
 *   dx       dx[r, i] = sum_o dy[r, o] W[o, i]    A = dy, B = W as stored
 *   dW       dW[o, i] = sum_r dy[r, o] x[r, i]    A = dy^T, B = x (or, for narrow layers, dW^T = x^T dy)
 * Each element of C is one chain of FMAs over p in increasing order, started from 0 (or from C when
 * accumulating), so the result does not depend on the tiling, and a run gives the same bits every time.
 * The kernels never allocate: the forward's panel lives in the backend's planned workspace. */

/* Register tile: C[mr, nv vectors] at C (row stride c_rs; c_cs 1, or else elements are c_cs apart and the
 * tile goes out through a scratch copy). acc_c: start from C instead of 0. The epilogue (when C is
 * contiguous) adds bias, applies ReLU, or multiplies by act'(gx) (relu or tanh through gx, the layer input
 * of a backward pass). */
typedef struct DK(epi) {
    const float *bias; /* [n] or NULL */
    int32_t relu;
    const float *gx; /* NULL, or [m, n] at row stride ld_gx: multiply by act_gx'(gx) */
    int64_t ld_gx;
    int32_t act_gx;
} DK(epi);

/* The tile's registers are named variables, not an array (GCC keeps an array of vectors in memory and
 * stores it on every step): c<i><j> accumulates row i, vector j; DK_IJ(X) expands X for every (i, j) the
 * tile has, and the mr/nv tests fold away since every tile is inlined with constant mr and nv. */
#define DK_J(X, i) X(i, 0) X(i, 1) X(i, 2) X(i, 3)
#define DK_IJ(X) DK_J(X, 0) DK_J(X, 1) DK_J(X, 2) DK_J(X, 3) DK_J(X, 4) DK_J(X, 5)
#define DK_HAS(i, j) ((i) < mr && (j) < nv && (i) < MR && (j) < NVMAX)

static inline __attribute__((always_inline)) void DK(tile)(const int mr, const int nv, const M tail, const int64_t k,
                                                           const float *restrict A, const int64_t a_rs,
                                                           const int64_t a_ks, const float *restrict B,
                                                           const int64_t b_ks, float *restrict C, const int64_t c_rs,
                                                           const int64_t c_cs, const int32_t n_valid, const int acc_c,
                                                           const DK(epi) *e) {
#define DK_DECL(i, j) V c##i##j = V_ZERO();
    DK_IJ(DK_DECL)
#undef DK_DECL
    if (acc_c && c_cs == 1) {
#define DK_LOADC(i, j) \
    if (DK_HAS(i, j)) c##i##j = j == nv - 1 ? V_LOADM(C + i * c_rs + j * VL, tail) : V_LOAD(C + i * c_rs + j * VL);
        DK_IJ(DK_LOADC)
#undef DK_LOADC
    }
    const float *a = A, *b = B;
    for (int64_t p = 0; p < k; p++, a += a_ks, b += b_ks) {
        V b0 = V_ZERO(), b1 = V_ZERO(), b2 = V_ZERO(), b3 = V_ZERO();
#define DK_LOADB(j) \
    if ((j) < nv && (j) < NVMAX) b##j = (j) == nv - 1 ? V_LOADM(b + (j) * VL, tail) : V_LOAD(b + (j) * VL);
        DK_LOADB(0) DK_LOADB(1) DK_LOADB(2) DK_LOADB(3)
#undef DK_LOADB
#define DK_FMA(i, j) \
    if (DK_HAS(i, j)) c##i##j = V_FMA(a##i, b##j, c##i##j);
#define DK_ROW(i) \
    if ((i) < mr) {                        \
        V a##i = V_BCAST(a + (i) * a_rs); \
        DK_J(DK_FMA, i)                    \
    }
        DK_ROW(0) DK_ROW(1) DK_ROW(2) DK_ROW(3) DK_ROW(4) DK_ROW(5)
#undef DK_ROW
#undef DK_FMA
    }
    if (c_cs == 1) {
        V one = V_SET1(1.0f);
        V bias0 = V_ZERO(), bias1 = V_ZERO(), bias2 = V_ZERO(), bias3 = V_ZERO();
#define DK_BIAS(j) \
    if ((j) < nv && (j) < NVMAX && e && e->bias) bias##j = V_LOADM(e->bias + (j) * VL, (j) == nv - 1 ? tail : M_FULL);
        DK_BIAS(0) DK_BIAS(1) DK_BIAS(2) DK_BIAS(3)
#undef DK_BIAS
#define DK_STORE(i, j)                                                                          \
    if (DK_HAS(i, j)) {                                                                         \
        V v = c##i##j;                                                                          \
        const M mk = (j) == nv - 1 ? tail : M_FULL;                                             \
        if (e && e->bias) v = V_ADD(v, bias##j);                                                \
        if (e && e->relu) v = V_RELU(v);                                                        \
        if (e && e->gx) {                                                                       \
            V g = V_LOADM(e->gx + (i) * e->ld_gx + (j) * VL, mk);                               \
            if (e->act_gx == RLT_ACT_RELU) v = V_RELU_GRAD(v, g);                               \
            else if (e->act_gx == RLT_ACT_TANH) v = V_MUL(v, V_SUB(one, V_MUL(g, g)));          \
        }                                                                                       \
        if ((j) == nv - 1) V_STOREM(C + (i) * c_rs + (j) * VL, tail, v);                        \
        else V_STORE(C + (i) * c_rs + (j) * VL, v);                                             \
    }
        DK_IJ(DK_STORE)
#undef DK_STORE
        (void)one;
    } else {
        float t[MR][NVMAX * VL] = {{0.0f}}; /* (zeroed only to keep the compiler sure of it) */
#define DK_SPILL(i, j) \
    if (DK_HAS(i, j)) V_STORE(&t[i][(j) * VL], c##i##j);
        DK_IJ(DK_SPILL)
#undef DK_SPILL
        for (int i = 0; i < mr; i++)
            for (int32_t j = 0; j < n_valid; j++) {
                float *c = C + i * c_rs + j * c_cs;
                *c = acc_c ? *c + t[i][j] : t[i][j];
            }
    }
}

/* One register-tile shape per (mr, nv) so that each tile is fully unrolled with its accumulators in
 * registers; this picks the instance. */
static void DK(tile_any)(int mr, int nv, M tail, int64_t k, const float *A, int64_t a_rs, int64_t a_ks, const float *B,
                         int64_t b_ks, float *C, int64_t c_rs, int64_t c_cs, int32_t n_valid, int acc_c,
                         const DK(epi) *e) {
#define DK_T(R, N)                                                                                   \
    case (R) * 8 + (N):                                                                              \
        DK(tile)(R, N, tail, k, A, a_rs, a_ks, B, b_ks, C, c_rs, c_cs, n_valid, acc_c, e);           \
        break;
#define DK_ROWS(N) DK_T(1, N) DK_T(2, N) DK_T(3, N) DK_T(4, N) DK_T(5, N) DK_T(6, N)
    switch (mr * 8 + nv) {
        DK_ROWS(1)
        DK_ROWS(2)
#if NVMAX >= 3
        DK_ROWS(3)
#endif
#if NVMAX >= 4
        DK_ROWS(4)
#endif
    default:
        break;
    }
#undef DK_ROWS
#undef DK_T
}

/* C[m, n] (+)= A B over the whole shape: panels of NVMAX vectors of columns, tiles of MR rows. B(p, j) is at
 * B[p * b_ks + j]; C(i, j) at C[i * c_rs + j * c_cs]. The epilogue's bias and gx are indexed like C. */
static void DK(gemm)(int64_t m, int32_t n, int64_t k, const float *A, int64_t a_rs, int64_t a_ks, const float *B,
                     int64_t b_ks, float *C, int64_t c_rs, int64_t c_cs, int acc_c, const DK(epi) *e) {
    for (int32_t j0 = 0; j0 < n; j0 += NVMAX * VL) {
        int32_t nb = n - j0 < NVMAX * VL ? n - j0 : NVMAX * VL;
        int nv = (nb + VL - 1) / VL;
        M tail = M_TAIL(nb - (nv - 1) * VL);
        DK(epi) ej, *pe = NULL;
        if (e) {
            ej = *e;
            if (ej.bias) ej.bias += j0;
            if (ej.gx) ej.gx += j0;
            pe = &ej;
        }
        for (int64_t i0 = 0; i0 < m; i0 += MR) {
            int mr = m - i0 < MR ? (int)(m - i0) : MR;
            DK(tile_any)(mr, nv, tail, k, A + i0 * a_rs, a_rs, a_ks, B + j0, b_ks, C + i0 * c_rs + j0 * c_cs, c_rs,
                         c_cs, nb, acc_c, pe);
            if (pe && pe->gx) pe->gx += MR * pe->ld_gx;
        }
    }
}

/* pack[i * pw + o] = W[o * ldw + i] for o < ob, i < ib: whole VL x VL blocks in registers where the
 * instruction set has a transpose (V_TRANSPOSE), the edges one element at a time. */
static void DK(pack_wt)(const float *W, int64_t ldw, int32_t ob, int32_t ib, float *pack, int32_t pw) {
    int32_t o_full = 0, i_full = 0;
#ifdef V_TRANSPOSE
    o_full = ob / VL * VL;
    i_full = ib / VL * VL;
    for (int32_t o = 0; o < o_full; o += VL)
        for (int32_t i = 0; i < i_full; i += VL) V_TRANSPOSE(W + o * ldw + i, ldw, pack + (int64_t)i * pw + o, pw);
#endif
    for (int32_t o = 0; o < ob; o++)
        for (int32_t i = o < o_full ? i_full : 0; i < ib; i++) pack[(int64_t)i * pw + o] = W[o * ldw + i];
}

/* y = act(x W^T + b) with act NONE or RELU (TANH is applied by the caller). pack: CPU_DENSE_PACK_FLOATS floats
 * (NULL: the dot-product form for every shape, which is what narrow outputs, fo < VL / 2, always use). */
static void DK(linear_forward)(int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx, const float *W,
                               const float *b, float *y, int32_t ldy, int32_t relu, float *pack) {
    if (!pack || fo < VL / 2) {
        /* Dot products along i, four rows at a time (four independent FMA chains sharing each load of W),
         * each chain reduced across lanes at the end. */
        for (int32_t r = 0; r < rows; r += 4) {
            int nr = rows - r < 4 ? rows - r : 4;
            const float *x0 = x + (int64_t)r * ldx, *x1 = nr > 1 ? x0 + ldx : x0;
            const float *x2 = nr > 2 ? x1 + ldx : x0, *x3 = nr > 3 ? x2 + ldx : x0;
            for (int32_t o = 0; o < fo; o++) {
                const float *w = W + (int64_t)o * fi;
                V s0 = V_ZERO(), s1 = V_ZERO(), s2 = V_ZERO(), s3 = V_ZERO();
                int32_t i = 0;
                for (; i + VL <= fi; i += VL) {
                    V wv = V_LOAD(w + i);
                    s0 = V_FMA(V_LOAD(x0 + i), wv, s0);
                    s1 = V_FMA(V_LOAD(x1 + i), wv, s1);
                    s2 = V_FMA(V_LOAD(x2 + i), wv, s2);
                    s3 = V_FMA(V_LOAD(x3 + i), wv, s3);
                }
                if (i < fi) {
                    M mk = M_TAIL(fi - i);
                    V wv = V_LOADM(w + i, mk);
                    s0 = V_FMA(V_LOADM(x0 + i, mk), wv, s0);
                    s1 = V_FMA(V_LOADM(x1 + i, mk), wv, s1);
                    s2 = V_FMA(V_LOADM(x2 + i, mk), wv, s2);
                    s3 = V_FMA(V_LOADM(x3 + i, mk), wv, s3);
                }
                float z[4] = {V_REDUCE(s0), V_REDUCE(s1), V_REDUCE(s2), V_REDUCE(s3)};
                for (int q = 0; q < nr; q++) {
                    float v = b ? z[q] + b[o] : z[q];
                    if (relu) v = v > 0.0f ? v : 0.0f;
                    y[(int64_t)(r + q) * ldy + o] = v;
                }
            }
        }
        return;
    }
    /* W^T a panel at a time: CPU_DENSE_PACK_K inputs x NVMAX*VL outputs, row stride NVMAX*VL. */
    const int32_t pw = NVMAX * VL;
    for (int32_t o0 = 0; o0 < fo; o0 += pw) {
        int32_t ob = fo - o0 < pw ? fo - o0 : pw;
        for (int32_t i0 = 0; i0 < fi; i0 += CPU_DENSE_PACK_K) {
            int32_t ib = fi - i0 < CPU_DENSE_PACK_K ? fi - i0 : CPU_DENSE_PACK_K;
            DK(pack_wt)(W + (int64_t)o0 * fi + i0, fi, ob, ib, pack, pw);
            int last = i0 + ib == fi;
            DK(epi) e = {last && b ? b + o0 : NULL, last && relu, NULL, 0, 0};
            DK(gemm)(rows, ob, ib, x + i0, ldx, 1, pack, pw, y + o0, ldy, 1, i0 > 0, &e);
        }
    }
}

/* The backward of linear_forward (see kernels/backend.h), db excepted (the caller sums it). */
static void DK(linear_backward)(int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy, const float *x,
                                int32_t ldx, int32_t act_x, const float *W, float *dW, float beta, float *dx,
                                int32_t lddx) {
    if (dW) {
        int acc = beta != 0.0f;
        if (acc && beta != 1.0f)
            for (int64_t i = 0; i < (int64_t)fo * fi; i++) dW[i] *= beta;
        /* Narrow input: vectors along o, dW written transposed. The choice depends on fi alone, so a dW split
         * by outputs across threads takes the same path, and gives the same bits, as the whole. */
        if (fi < VL)
            DK(gemm)(fi, fo, rows, x, 1, ldx, dy, lddy, dW, 1, fi, acc, NULL);
        else
            DK(gemm)(fo, fi, rows, dy, 1, lddy, x, ldx, dW, fi, 1, acc, NULL);
    }
    if (dx) {
        DK(epi) e = {NULL, 0, act_x != RLT_ACT_NONE ? x : NULL, ldx, act_x};
        DK(gemm)(rows, fi, fo, dy, lddy, 1, W, fi, dx, lddx, 1, 0, &e);
    }
}

const cpu_dense_kernels DK(kernels) = {
    .name = DK_NAME,
    .linear_forward = DK(linear_forward),
    .linear_backward = DK(linear_backward),
};
