"""The instruction sets nsample's C++ kernels are compiled for, each with its compiler flags (kernels.py builds
them). Apart from kernels.py and torch-free, so that the command line and the benchmark list the sets without
importing torch."""

ISA_FLAGS = {  # at::vec picks its implementation from CPU_CAPABILITY_*; the -m flags let the compiler emit it
    "avx2": ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-mavx2", "-mfma", "-mf16c"],
    "avxvnni": ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-mavx2", "-mfma", "-mf16c",
                "-mavxvnni"],  # AVX2 with VNNI's 256-bit dot products: Intel clients since Alder Lake
    "avx512": ["-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512", "-mavx512f", "-mavx512bw", "-mavx512vl",
               "-mavx512dq", "-mfma", "-mf16c"],
    "avx512vnni": ["-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512", "-mavx512f", "-mavx512bw", "-mavx512vl",
                   "-mavx512dq", "-mavx512vnni", "-mfma", "-mf16c"],  # Intel since Cascade Lake, AMD since Zen 4
    "neon": ["-DCPU_CAPABILITY=DEFAULT"],  # ARM64: at::vec's DEFAULT build is NEON there (macOS's clang builds for
    # Apple's cores, whose dot product the int8-activation kernels then use)
    "neondot": ["-DCPU_CAPABILITY=DEFAULT", "-march=armv8.2-a+dotprod"],  # ARM64 Linux with ARMv8.2's dot product
}
