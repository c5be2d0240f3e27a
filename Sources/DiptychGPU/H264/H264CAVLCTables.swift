import CGLES

/// The CAVLC pass's code tables (ITU-T H.264 9.2), in one read-only storage
/// buffer per context (binding 9), each table at the offset its `#define` gives
/// the shader. As constant arrays in the shader they were copied into every
/// invocation's local memory before its work (752 stores an invocation on
/// NVIDIA), since they are indexed by variables (docs/ARCHITECTURE.md, "The
/// GPU encoder"). Render thread only.
final class H264CAVLCTables {
    static let binding: GLuint = 9

    /// The tables in buffer order, with the name the shader reads each by.
    static let tables: [(name: String, words: [UInt32])] = [
        ("COEFF_TOKEN", coeffToken),
        ("CHROMA_DC_TOKEN", chromaDCToken),
        ("TOTAL_ZEROS", totalZeros),
        ("CHROMA_DC_TOTAL_ZEROS", chromaDCTotalZeros),
        ("RUN_BEFORE", runBefore),
        ("INTER_CBP_CODE", interCBPCode),
        ("INTRA4_CBP_CODE", intra4CBPCode),
    ]

    /// `#define NAME_AT offset` for each table, for the shader's source.
    static var defines: String {
        var offset = 0, text = ""
        for t in tables {
            text += "#define \(t.name)_AT \(offset)\n"
            offset += t.words.count
        }
        return text
    }

    private(set) var buffer: GLuint = 0

    init() {
        let words = Self.tables.flatMap(\.words)
        glGenBuffers(1, &buffer)
        glBindBuffer(GL.shaderStorageBuffer, buffer)
        glBufferData(GL.shaderStorageBuffer, GLsizeiptr(words.count * 4), words, GLenum(GL_STATIC_DRAW))
        glBindBuffer(GL.shaderStorageBuffer, 0)
    }

    func release() {
        if buffer != 0 { glDeleteBuffers(1, &buffer) }
        buffer = 0
    }

    deinit { precondition(buffer == 0, "H264CAVLCTables released without release()") }

    /// Table 9-5 coeff_token for 0 <= nC < 2, 2 <= nC < 4, 4 <= nC < 8, 8 <= nC: (code << 8) | length,
    /// indexed [table * 68 + TotalCoeff * 4 + TrailingOnes].
    private static let coeffToken: [UInt32] = [
        257, 0, 0, 0, 1286, 258, 0, 0, 1800, 1030, 259, 0, 1801, 1544,
        1287, 773, 1802, 1545, 1288, 774, 1803, 1546, 1289, 1031, 3853, 1547, 1290, 1032,
        2829, 3597, 1291, 1033, 2061, 2573, 3341, 1034, 3854, 3598, 2317, 1035, 2830, 2574,
        3342, 3085, 3855, 3599, 2318, 3086, 2831, 2575, 3343, 2062, 3856, 271, 2319, 3087,
        2832, 3600, 3344, 2063, 1808, 2576, 2320, 3088, 1040, 1552, 1296, 2064, 770, 0,
        0, 0, 2822, 514, 0, 0, 1798, 1797, 771, 0, 1799, 2566, 2310, 1284,
        1800, 1542, 1286, 1028, 1032, 1543, 1287, 1541, 1801, 1544, 1288, 2054, 3851, 1545,
        1289, 1030, 2827, 3595, 3339, 1031, 3852, 2571, 2315, 1033, 2828, 3596, 3340, 3083,
        2060, 2572, 2316, 2059, 3853, 3597, 3341, 3084, 2829, 2573, 2317, 3085, 1805, 2830,
        1549, 2061, 2318, 2062, 2574, 269, 1806, 1550, 1294, 1038, 3844, 0, 0, 0,
        3846, 3588, 0, 0, 2822, 3845, 3332, 0, 2054, 3077, 3589, 3076, 3847, 2565,
        2821, 2820, 2823, 2053, 2309, 2564, 2311, 3590, 3334, 2308, 2055, 2566, 2310, 2052,
        3848, 3591, 3335, 3333, 2824, 3592, 2567, 3078, 3849, 2568, 3336, 3079, 2825, 3593,
        2312, 3080, 2057, 2569, 3337, 2056, 3338, 1801, 2313, 3081, 2314, 3082, 2826, 2570,
        1290, 2058, 1802, 1546, 266, 1034, 778, 522, 774, 0, 0, 0, 6, 262,
        6, 6, 1030, 1286, 1542, 6, 2054, 2310, 2566, 2822, 3078, 3334, 3590, 3846,
        4102, 4358, 4614, 4870, 5126, 5382, 5638, 5894, 6150, 6406, 6662, 6918, 7174, 7430,
        7686, 7942, 8198, 8454, 8710, 8966, 9222, 9478, 9734, 9990, 10246, 10502, 10758, 11014,
        11270, 11526, 11782, 12038, 12294, 12550, 12806, 13062, 13318, 13574, 13830, 14086, 14342, 14598,
        14854, 15110, 15366, 15622, 15878, 16134
    ]
    /// Table 9-5, nC = -1 (chroma DC): [TotalCoeff * 4 + TrailingOnes].
    private static let chromaDCToken: [UInt32] = [
        258, 0, 0, 0, 1798, 257, 0, 0, 1030, 1542, 259, 0, 774, 775,
        519, 1286, 518, 776, 520, 7
    ]
    /// Tables 9-7 and 9-8 total_zeros for 4x4 blocks: [(TotalCoeff - 1) * 16 + total_zeros].
    private static let totalZeros: [UInt32] = [
        257, 771, 515, 772, 516, 773, 517, 774, 518, 775, 519, 776, 520, 777,
        521, 265, 1795, 1539, 1283, 1027, 771, 1284, 1028, 772, 516, 773, 517, 774,
        518, 262, 6, 0, 1284, 1795, 1539, 1283, 1028, 772, 1027, 771, 516, 773,
        517, 262, 261, 6, 0, 0, 773, 1795, 1284, 1028, 1539, 1283, 1027, 772,
        771, 516, 517, 261, 5, 0, 0, 0, 1284, 1028, 772, 1795, 1539, 1283,
        1027, 771, 516, 261, 260, 5, 0, 0, 0, 0, 262, 261, 1795, 1539,
        1283, 1027, 771, 515, 260, 259, 6, 0, 0, 0, 0, 0, 262, 261,
        1283, 1027, 771, 770, 515, 260, 259, 6, 0, 0, 0, 0, 0, 0,
        262, 260, 261, 771, 770, 514, 515, 259, 6, 0, 0, 0, 0, 0,
        0, 0, 262, 6, 260, 770, 514, 259, 258, 261, 0, 0, 0, 0,
        0, 0, 0, 0, 261, 5, 259, 770, 514, 258, 260, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 4, 260, 259, 515, 257, 771, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 4, 260, 258, 257, 259, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 259, 257, 258,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 258,
        257, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        1, 257, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0
    ]
    /// Table 9-9a total_zeros for chroma DC: [(TotalCoeff - 1) * 4 + total_zeros].
    private static let chromaDCTotalZeros: [UInt32] = [
        257, 258, 259, 3, 257, 258, 2, 0, 257, 1, 0, 0
    ]
    /// Table 9-10 run_before: [(min(zerosLeft, 7) - 1) * 16 + run_before].
    private static let runBefore: [UInt32] = [
        257, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 257, 258, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 770, 514, 258, 2, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 770, 514, 258, 259, 3, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 770, 514, 771, 515, 259, 3,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 770, 3, 259, 771,
        515, 1283, 1027, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1795, 1539,
        1283, 1027, 771, 515, 259, 260, 261, 262, 263, 264, 265, 266, 267, 0
    ]
    /// Table 9-4, inter column: coded_block_pattern → codeNum.
    private static let interCBPCode: [UInt32] = [
        0, 2, 3, 7, 4, 8, 17, 13, 5, 18, 9, 14, 10, 15,
        16, 11, 1, 32, 33, 36, 34, 37, 44, 40, 35, 45, 38, 41,
        39, 42, 43, 19, 6, 24, 25, 20, 26, 21, 46, 28, 27, 47,
        22, 29, 23, 30, 31, 12
    ]
    /// Table 9-4, Intra_4x4 column: coded_block_pattern → codeNum.
    private static let intra4CBPCode: [UInt32] = [
        3, 29, 30, 17, 31, 18, 37, 8, 32, 38, 19, 9, 20, 10,
        11, 2, 16, 33, 34, 21, 35, 22, 39, 4, 36, 40, 23, 5,
        24, 6, 7, 1, 41, 42, 43, 25, 44, 26, 46, 12, 45, 47,
        27, 13, 28, 14, 15, 0
    ]
}
