// The switch from a ggml type id to the int8-activation kernels' format of it: x86's (q8_formats.h, q8_kquants.h) or
// ARM64's (q8_neon.h, q8_neon_kquants.h), whichever this build has; the same formats on both.
#pragma once
#include <cstdint>

#include "gguf_formats.h"
#include "q8_formats.h"
#include "q8_neon.h"
#include "q8_rows.h"

#if defined(NSAMPLE_Q8_X86) || defined(NSAMPLE_Q8_NEON)
namespace q8 {

// Calls fn(Format{}, gguf's Format{}) for a quantized ggml type id; returns false for any other (F32, F16, BF16).
// A K-quant's Format has `block` and `weights`; the others `chunk`.
template <class Fn>
bool with_format(int64_t type, Fn&& fn) {
  switch (type) {
    case gguf::Q4_0::TYPE: fn(Q4_0{}, gguf::Q4_0{}); return true;
    case gguf::Q4_1::TYPE: fn(Q4_1{}, gguf::Q4_1{}); return true;
    case gguf::Q5_0::TYPE: fn(Q5_0{}, gguf::Q5_0{}); return true;
    case gguf::Q5_1::TYPE: fn(Q5_1{}, gguf::Q5_1{}); return true;
    case gguf::Q8_0::TYPE: fn(Q8_0{}, gguf::Q8_0{}); return true;
    case gguf::IQ4_NL::TYPE: fn(IQ4_NL{}, gguf::IQ4_NL{}); return true;
    case gguf::MXFP4::TYPE: fn(MXFP4{}, gguf::MXFP4{}); return true;
    case gguf::Q2_K::TYPE: fn(Q2_K{}, gguf::Q2_K{}); return true;
    case gguf::Q3_K::TYPE: fn(Q3_K{}, gguf::Q3_K{}); return true;
    case gguf::Q4_K::TYPE: fn(Q4_K{}, gguf::Q4_K{}); return true;
    case gguf::Q5_K::TYPE: fn(Q5_K{}, gguf::Q5_K{}); return true;
    case gguf::Q6_K::TYPE: fn(Q6_K{}, gguf::Q6_K{}); return true;
    case gguf::IQ4_XS::TYPE: fn(IQ4_XS{}, gguf::IQ4_XS{}); return true;
    default: return false;
  }
}

}  // namespace q8
#endif
