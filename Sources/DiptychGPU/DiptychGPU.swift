// DiptychGPU: compositing on the GPU through EGL and OpenGL ES 3, headless.
// No FFmpeg here, so a GPU-only binary runs where FFmpeg is absent.
//
// Pieces, by file:
// - GPUCompositor      the thread-safe front (any thread; blocks until done)
// - RenderThread       the one thread that owns the context; every GL call runs there
// - GLContext          EGL display + ES 3 context; DisplayLadder walks
//                      GBM render nodes → EGL devices (hardware, then software) → surfaceless
// - GPURenderer        uploads, composite pass, NV12 pass, readback ring (render thread only)
// - FenceTimeline      submission serials and the FIFO of (fence, completion):
//                      nothing a submitted frame uses is deleted or reused before its fence
// - ShaderCache        programs from Shaders/ by ShaderKey (#define prelude)
// - PassTimer          GL_EXT_disjoint_timer_query per pass, CPU time as fallback
//
// Conventions: memory row 0 is the top of the picture everywhere. Textures are
// uploaded with row 0 at t = 0 and canvas row y is framebuffer row y, so
// glReadPixels returns rows top-down and nothing is ever flipped.
//
// Teardown (GPUCompositor.shutdown): readbacks dropped → every texture set and
// target retired → all fences waited (unless the context is lost) and queued
// releases run → ring buffers, queries, programs, VAO deleted → context
// destroyed → display terminated (last user) → gbm_device destroyed → fd closed
// → render thread ended.
