// gpugraph's CPU backend: assert in kernels, as on a GPU: a failed assertion stops the kernel, and the stream
// reports it when synchronized (CUDA's cudaErrorAssert). <cassert> includes this file too. No include guard, as
// the standard's: each inclusion defines assert afresh, following NDEBUG.
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : ::gg_assert_failed(#e, __FILE__, __LINE__, __PRETTY_FUNCTION__))
#endif
#ifndef GG_ASSERT_DECLARED
#define GG_ASSERT_DECLARED
[[noreturn]] inline void gg_assert_failed(const char* expression, const char* file, unsigned line,
                                          const char* function);
#endif
