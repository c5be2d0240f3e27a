// What NVENC answers on this machine, through the calls FFmpeg's
// h264_nvenc/hevc_nvenc make before their first frame: libnvidia-encode.so.1
// loaded, the highest API version the driver takes against the one FFmpeg
// was built for (the ffnvcodec headers, NVENCAPI_VERSION), then an encode
// session opened on CUDA device 0's primary context (what `--encoder nvenc`
// shares with the compositor) and, where it opens, the codecs it lists and
// their limits. The status of NvEncOpenEncodeSessionEx is what FFmpeg logs as
// "OpenEncodeSessionEx failed: <status> (<code>)"; `diptych probe` and
// NVENCProbe (DiptychMedia) name the reason from it.
//
// Build (ffnvcodec headers from libffmpeg-nvenc-dev; no CUDA toolkit):
//   gcc -O2 nvenc_open.c -ldl -o nvenc_open        Run: ./nvenc_open [device]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ffnvcodec/dynlink_loader.h>

static const char *status_name(NVENCSTATUS s) {
    static const char *names[] = {
        "success", "no encode device", "unsupported device", "invalid encoder device", "invalid device",
        "device not exist", "invalid ptr", "invalid event", "invalid param", "invalid call", "out of memory",
        "encoder not initialized", "unsupported param", "lock busy", "not enough buffer", "invalid version",
        "map failed", "need more input", "encoder busy", "event not registered", "generic error",
        "incompatible client key", "unimplemented", "resource register failed", "resource not registered",
        "resource not mapped"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown";
}

int main(int argc, char **argv) {
    int ordinal = argc > 1 ? atoi(argv[1]) : 0;
    CudaFunctions *cu = NULL;
    NvencFunctions *nv = NULL;
    if (cuda_load_functions(&cu, NULL) != 0) { printf("libcuda: absent\n"); return 3; }
    if (nvenc_load_functions(&nv, NULL) != 0) { printf("libnvidia-encode: absent\n"); return 4; }
    printf("libnvidia-encode: loaded\n");
    uint32_t max = 0;
    NVENCSTATUS s = nv->NvEncodeAPIGetMaxSupportedVersion(&max);
    uint32_t built = (NVENCAPI_MAJOR_VERSION << 4) | NVENCAPI_MINOR_VERSION;
    printf("api: driver %u.%u, built for %u.%u (%s)\n", max >> 4, max & 15, built >> 4, built & 15,
           s != NV_ENC_SUCCESS ? "query failed" : max < built ? "driver too old" : "ok");
    CUdevice dev;
    CUcontext ctx;
    char name[256] = "";
    if (cu->cuInit(0) != CUDA_SUCCESS || cu->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
        cu->cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) { printf("cuda device %d: unavailable\n", ordinal); return 5; }
    cu->cuDeviceGetName(name, sizeof name, dev);
    printf("cuda device %d: %s\n", ordinal, name);
    NV_ENCODE_API_FUNCTION_LIST fl = { .version = NV_ENCODE_API_FUNCTION_LIST_VER };
    s = nv->NvEncodeAPICreateInstance(&fl);
    if (s != NV_ENC_SUCCESS) { printf("create instance: %s (%d)\n", status_name(s), s); return 6; }
    NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS p = { .version = NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS_VER,
        .deviceType = NV_ENC_DEVICE_TYPE_CUDA, .device = ctx, .apiVersion = NVENCAPI_VERSION };
    void *enc = NULL;
    s = fl.nvEncOpenEncodeSessionEx(&p, &enc);
    printf("open session: %s (%d)\n", status_name(s), s);
    if (s != NV_ENC_SUCCESS) return 7;
    uint32_t n = 0;
    fl.nvEncGetEncodeGUIDCount(enc, &n);
    GUID guids[16];
    uint32_t got = 0;
    fl.nvEncGetEncodeGUIDs(enc, guids, n < 16 ? n : 16, &got);
    for (uint32_t i = 0; i < got; i++) {
        const char *codec = !memcmp(&guids[i], &NV_ENC_CODEC_H264_GUID, sizeof(GUID)) ? "h264"
                          : !memcmp(&guids[i], &NV_ENC_CODEC_HEVC_GUID, sizeof(GUID)) ? "hevc" : "other";
        int caps[] = { NV_ENC_CAPS_WIDTH_MAX, NV_ENC_CAPS_HEIGHT_MAX, NV_ENC_CAPS_NUM_MAX_BFRAMES, NV_ENC_CAPS_SUPPORT_10BIT_ENCODE };
        int v[4] = {0};
        for (int c = 0; c < 4; c++) {
            NV_ENC_CAPS_PARAM q = { .version = NV_ENC_CAPS_PARAM_VER, .capsToQuery = caps[c] };
            fl.nvEncGetEncodeCaps(enc, guids[i], &q, &v[c]);
        }
        printf("codec %s: max %dx%d, b-frames %d, 10-bit %d\n", codec, v[0], v[1], v[2], v[3]);
    }
    fl.nvEncDestroyEncoder(enc);
    return 0;
}
