// swift-tools-version:6.0
import PackageDescription

// Module graph (see docs/ARCHITECTURE.md, "Modules"):
//   DiptychCore  pure Swift: geometry, layouts, orientation, clock, policies, configuration
//   DiptychCUDA  the CUDA driver and NVDEC, loaded at run time (capabilities, CUDA–GL interop)
//   DiptychGPU   EGL + GLES only (no FFmpeg), so GPU-only binaries stay small and portable
//   DiptychMedia FFmpeg: sources, encoders, muxers
//   DiptychText  text overlays set as pictures (FreeType and HarfBuzz, loaded at run time)
//   Diptych      the session that ties them together; public embedding API
//   DiptychServer `diptych serve`: many takes on one GPU behind an HTTP API (libmicrohttpd)
//   diptych      the command-line tool
let package = Package(
    name: "Diptych",
    products: [
        .library(name: "Diptych", targets: ["Diptych"]),
        .library(name: "DiptychCore", targets: ["DiptychCore"]),
        .library(name: "DiptychOptions", targets: ["DiptychOptions"]),
        .library(name: "DiptychGPU", targets: ["DiptychGPU"]),
        .library(name: "DiptychMedia", targets: ["DiptychMedia"]),
        .executable(name: "diptych", targets: ["diptych"]),
        // The C API (include/diptych.h) as a shared library: libDiptychEmbedded.so
        // with SONAME libdiptych.so.0; scripts/install puts it in place as libdiptych.so.
        .library(name: "DiptychEmbedded", type: .dynamic, targets: ["DiptychC"]),
    ],
    targets: [
        // System libraries, found with pkg-config. Each module's shim.h also
        // holds the prefixed static inline helpers for macros Swift cannot import.
        .systemLibrary(name: "CEGL", pkgConfig: "egl", providers: [.apt(["libegl-dev"])]),
        .systemLibrary(name: "CGLES", pkgConfig: "glesv2", providers: [.apt(["libgles-dev"])]),
        // GBM is header-only at build time and loaded with dlopen at run time,
        // so binaries run on machines without libgbm (NVIDIA headless servers).
        // (No pkgConfig here: pkg-config would add -lgbm and make libgbm a hard dependency.)
        .systemLibrary(name: "CGBM", providers: [.apt(["libgbm-dev"])]),
        // libva likewise: header-only here, loaded with dlopen by EncoderProbe, so the
        // self-contained server build (whose FFmpeg has no VA-API) needs no libva.
        .systemLibrary(name: "CVA", providers: [.apt(["libva-dev"])]),
        .systemLibrary(name: "CFFmpeg", pkgConfig: "libavformat",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswscale-dev",
                                         "libswresample-dev", "libavfilter-dev"])]),

        // libx264/libx265 headers only (their preset and tune names); FFmpeg links the libraries.
        .systemLibrary(name: "CX26x", providers: [.apt(["libx264-dev", "libx265-dev"])]),
        // The CUDA driver API and NVDEC (FFmpeg's ffnvcodec headers): header-only at
        // build time, libcuda.so.1 and libnvcuvid.so.1 loaded with dlopen at run time.
        .systemLibrary(name: "CCUDA", providers: [.apt(["libffmpeg-nvenc-dev"])]),
        // V4L2's ioctls for the camera listing: the kernel's headers only, nothing linked (capture's
        // libavdevice is loaded at run time, or linked statically by scripts/build-server).
        .systemLibrary(name: "CV4L2"),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // Webhooks (`diptych serve --webhook`): libcurl and OpenSSL's libcrypto (HMAC-SHA256),
        // header-only here and loaded with dlopen when a webhook is configured, so the
        // self-contained server build links neither.
        .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CCrypto", providers: [.apt(["libssl-dev"])]),
        // Text overlays: FreeType and HarfBuzz, loaded with dlopen at first use (libfreetype.so.6,
        // libharfbuzz.so.0), so no binary links them. The headers (libfreetype-dev, libharfbuzz-dev)
        // check the module's own declarations and give the few struct fields it reads.
        .target(name: "CFreeType", cSettings: [.unsafeFlags(["-I/usr/include/freetype2", "-I/usr/include/harfbuzz"])]),

        .target(name: "DiptychCore"),
        // Text set as pictures for text overlays: HarfBuzz shapes, FreeType rasterises.
        .target(name: "DiptychText", dependencies: ["DiptychCore", "CFreeType"]),
        // The CUDA driver loaded at run time: devices, primary contexts, NVDEC's
        // capabilities and the CUDA–GL interop calls (no FFmpeg, no GL).
        .target(name: "DiptychCUDA", dependencies: ["DiptychCore", "CCUDA"]),
        // The option table: command-line flags, --help, the JSON form, the
        // embedding API's option strings and the server's request bodies.
        .target(name: "DiptychOptions", dependencies: ["DiptychCore"]),
        // Shaders live in the top-level Shaders/ folder, one file per role;
        // the EmbedShaders build-tool plugin turns them into string constants.
        .executableTarget(name: "shader-embed", path: "Sources/shader-embed"),
        .plugin(name: "EmbedShaders", capability: .buildTool(), dependencies: ["shader-embed"]),
        .target(name: "DiptychGPU",
                dependencies: ["DiptychCore", "DiptychCUDA", "CEGL", "CGLES", "CGBM"],
                plugins: ["EmbedShaders"]),
        .target(name: "DiptychMedia", dependencies: ["DiptychCore", "DiptychCUDA", "CFFmpeg", "CVA", "CX26x", "CV4L2"]),
        .target(name: "Diptych", dependencies: ["DiptychCore", "DiptychOptions", "DiptychGPU", "DiptychMedia", "DiptychText"]),
        // include/diptych.h as a module, so the C API's Swift side uses the header's own types.
        .systemLibrary(name: "CDiptych", path: "Sources/CDiptych"),
        // The @_cdecl entry points. RUNPATH $ORIGIN/diptych finds the Swift runtime
        // that scripts/install copies next to the installed library.
        .target(name: "DiptychC", dependencies: ["Diptych", "CDiptych"],
                linkerSettings: [.unsafeFlags(["-no-toolchain-stdlib-rpath", "-Xlinker", "-soname", "-Xlinker", "libdiptych.so.0",
                                               "-Xlinker", "-rpath", "-Xlinker", "$ORIGIN/diptych"])]),
        // `diptych bench`: composite and end-to-end stages, peers, table/JSON/chart/contact sheet.
        .target(name: "DiptychBench", dependencies: ["Diptych", "DiptychCore", "DiptychOptions", "DiptychGPU", "DiptychMedia", "CFFmpeg"],
                path: "bench/Sources/DiptychBench"),
        .target(name: "DiptychServer", dependencies: ["Diptych", "DiptychCore", "DiptychOptions", "DiptychGPU", "DiptychMedia", "CMicroHTTPD", "CCurl", "CCrypto"]),
        .executableTarget(name: "diptych", dependencies: ["Diptych", "DiptychOptions", "DiptychBench", "DiptychServer"]),
        .executableTarget(name: "diptych-gpu-bench", dependencies: ["DiptychGPU", "DiptychCUDA", "DiptychOptions"], path: "bench/GPUBench"),
        .executableTarget(name: "diptych-gpu-check", dependencies: ["DiptychGPU", "DiptychOptions"], path: "bench/GPUCheck"),

        .testTarget(name: "DiptychCoreTests", dependencies: ["DiptychCore"]),
        .testTarget(name: "DiptychOptionsTests", dependencies: ["DiptychOptions"]),
        .testTarget(name: "DiptychGPUTests", dependencies: ["DiptychGPU", "DiptychCUDA", "DiptychText"]),
        // A writer a media test SIGKILLs mid-take (crash safety of fragmented MP4).
        .executableTarget(name: "diptych-writer-fixture", dependencies: ["DiptychMedia"], path: "Tests/Fixtures/WriterFixture"),
        .testTarget(name: "DiptychMediaTests", dependencies: ["DiptychMedia", "DiptychCUDA", "diptych-writer-fixture"]),
        .testTarget(name: "DiptychTests", dependencies: ["Diptych", "diptych", "DiptychCUDA", "DiptychText"]),
        .testTarget(name: "DiptychServerTests", dependencies: ["DiptychServer", "DiptychMedia", "diptych"]),
        .testTarget(name: "DiptychBenchTests", dependencies: ["DiptychBench", "Diptych", "DiptychMedia", "CFFmpeg"],
                    path: "bench/Tests/DiptychBenchTests"),
    ],
    swiftLanguageModes: [.v6]
)
