import CGLES

/// The GPU encoder's result slots, one for each picture that may be in
/// flight: the scan pass's result words (the gather's indirect dispatch, the
/// picture's bits and bytes, overflow, each slice's bits: `h264pack.comp`),
/// the gather's bitstream, the fence after the picture's passes, and, where
/// reconstructions are kept, a copy of the picture's reconstruction.
/// Persistently mapped where the context has GL_EXT_buffer_storage: the GPU
/// writes them in host memory, read without a map call. Owns the buffers;
/// render thread only, but `read`.
final class H264ResultSlots {
    private struct Slot {
        var result: GLuint
        var output: GLuint
        var fence: BatchFence?
        /// The picture's reconstruction, copied after its passes (0: none kept).
        var reconstruction: GLuint = 0
        var resultWords: UnsafePointer<UInt32>? = nil
        var outputBytes: UnsafePointer<UInt8>? = nil
    }
    private var slots: [Slot] = []
    private var next = 0
    /// Whether the slots are persistently mapped.
    let mapped: Bool
    /// 32-bit words of a slot's result and of its bitstream.
    let resultWords: Int, outputWords: Int

    /// `depth` slots (at least one); `bufferStorage` maps them persistently;
    /// `reconstructionBytes`: each slot keeps a copy of its picture's reconstruction that size.
    init(depth: Int, resultWords: Int, outputWords: Int, bufferStorage: PFNGLBUFFERSTORAGEEXTPROC?,
         reconstructionBytes: Int? = nil) throws(GPUError) {
        self.resultWords = resultWords
        self.outputWords = outputWords
        mapped = bufferStorage != nil
        func buffer(_ bytes: Int) -> (GLuint, UnsafeRawPointer?) {
            var b: GLuint = 0
            glGenBuffers(1, &b)
            glBindBuffer(GL.shaderStorageBuffer, b)
            guard let bufferStorage else {
                glBufferData(GL.shaderStorageBuffer, GLsizeiptr(bytes), nil, GL.dynamicCopy)
                return (b, nil)
            }
            let flags = GL.mapReadBit | GL.mapPersistentBit | GL.mapCoherentBit
            bufferStorage(GL.shaderStorageBuffer, GLsizeiptr(bytes), nil, flags)
            return (b, glMapBufferRange(GL.shaderStorageBuffer, 0, GLsizeiptr(bytes), flags).map { UnsafeRawPointer($0) })
        }
        for _ in 0..<max(1, depth) {
            let (r, rp) = buffer(resultWords * 4), (o, op) = buffer(outputWords * 4)
            var copy: GLuint = 0
            if let reconstructionBytes {
                glGenBuffers(1, &copy)
                glBindBuffer(GL.shaderStorageBuffer, copy)
                glBufferData(GL.shaderStorageBuffer, GLsizeiptr(reconstructionBytes), nil, GL.dynamicCopy)
            }
            slots.append(Slot(result: r, output: o, fence: nil, reconstruction: copy, resultWords: rp?.assumingMemoryBound(to: UInt32.self),
                              outputBytes: op?.assumingMemoryBound(to: UInt8.self)))
        }
        glBindBuffer(GL.shaderStorageBuffer, 0)
        if mapped && slots.contains(where: { $0.resultWords == nil || $0.outputBytes == nil }) {
            release()
            throw .gl(label: "GPU encoder: persistent map of its result buffers failed", code: glGetError())
        }
    }

    func release() {
        let all = slots.flatMap { [$0.result, $0.output, $0.reconstruction] }.filter { $0 != 0 }
        glDeleteBuffers(GLsizei(all.count), all)
        slots = []
    }

    /// The slot of a picture about to be recorded (the oldest; its fence let go).
    func claim() -> Int {
        let i = next
        next = (next + 1) % slots.count
        slots[i].fence = nil
        return i
    }

    /// How many slots there are (pictures that may be in flight).
    var count: Int { slots.count }

    func result(_ i: Int) -> GLuint { slots[i].result }
    /// Slot `i`'s reconstruction copy, where reconstructions are kept.
    func reconstruction(_ i: Int) -> GLuint? { slots[i].reconstruction == 0 ? nil : slots[i].reconstruction }
    func output(_ i: Int) -> GLuint { slots[i].output }
    func setFence(_ i: Int, _ fence: BatchFence) { slots[i].fence = fence }

    /// Whether the GPU finished slot `i`'s picture (no wait).
    func isComplete(_ i: Int) -> Bool { slots[i].fence?.isSignalled ?? true }

    /// A picture's size as the scan pass wrote it into its result words:
    /// its bytes (each slice from a word of its own), its bits and each slice's.
    struct Size {
        var bytes: Int, bits: Int, overflowed: Bool
        var sliceBits: [Int]
        init(_ words: UnsafePointer<UInt32>, slices: Int) {
            bytes = Int(words[4]); bits = Int(words[3]); overflowed = words[5] != 0
            sliceBits = (0..<slices).map { Int(words[8 + $0]) }
        }
    }

    /// Slot `i`'s size once the GPU wrote it (blocks until then; the fence let go).
    func collect(_ i: Int, slices: Int) throws(GPUError) -> Size {
        slots[i].fence?.wait()
        slots[i].fence = nil
        if mapped { return try read(i, slices: slices) }
        glBindBuffer(GL.shaderStorageBuffer, slots[i].result)
        defer { glBindBuffer(GL.shaderStorageBuffer, 0) }
        guard let r = glMapBufferRange(GL.shaderStorageBuffer, 0, GLsizeiptr(resultWords * 4), GL.mapReadBit) else {
            throw .gl(label: "mapping the GPU encoder's result", code: glGetError())
        }
        defer { glUnmapBuffer(GL.shaderStorageBuffer) }
        return Size(r.assumingMemoryBound(to: UInt32.self), slices: slices)
    }

    /// `body` of slot `i`'s first `bytes` of bitstream (mapped for the call where the slots are not persistently).
    func withBitstream<T>(_ i: Int, bytes: Int, _ body: (UnsafeBufferPointer<UInt8>) -> T) throws(GPUError) -> T {
        if let o = slots[i].outputBytes { return body(UnsafeBufferPointer(start: o, count: bytes)) }
        glBindBuffer(GL.shaderStorageBuffer, slots[i].output)
        defer { glBindBuffer(GL.shaderStorageBuffer, 0) }
        guard let o = glMapBufferRange(GL.shaderStorageBuffer, 0, GLsizeiptr(bytes), GL.mapReadBit) else {
            throw .gl(label: "mapping the GPU encoder's bitstream (\(bytes) bytes)", code: glGetError())
        }
        defer { glUnmapBuffer(GL.shaderStorageBuffer) }
        return body(UnsafeBufferPointer(start: o.assumingMemoryBound(to: UInt8.self), count: bytes))
    }

    /// Slot `i`'s size read where the GPU wrote it (mapped slots only; no GL
    /// call, so a caller's thread may read it once the picture's fence has
    /// signalled; the fence is left to the render thread).
    func read(_ i: Int, slices: Int) throws(GPUError) -> Size {
        guard let words = slots[i].resultWords else {
            throw .encode("reading a picture without a GL call needs persistently mapped results")
        }
        return Size(words, slices: slices)
    }
}
