import Foundation
import DiptychCore
import DiptychGPU
import DiptychText

/// Checks, before a take is admitted (a server's 400), that every text of a
/// take can be set: FreeType and HarfBuzz load, each font a text names is
/// allowed by the source policy and is an outline font, each size can be set.
public enum TextOverlayCheck {
    public static func check(_ config: TakeConfiguration, policy: SourcePolicy) throws(ConfigurationError) {
        var fonts: [String: FontFile] = [:]
        try TakeTexts.loadFonts(TakeTexts.all(config), policy: policy, into: &fonts)
    }
}

/// The take's text overlays (docs/ARCHITECTURE.md, "Overlays"): each
/// output's texts with their renderers, expanded every frame from the
/// take's clock and set again (FreeType, HarfBuzz, one upload) only when the
/// expanded text differs from the one shown. Their pictures are overlay
/// pictures of their own ids (from `firstID` on, never reused), drawn as an
/// image overlay is. Used by the take's thread.
final class TakeTexts {
    /// One text of one output: its renderer and what it shows now.
    final class Shown {
        let overlay: TextOverlay
        let template: TextTemplate
        let renderer: TextRenderer
        let id: Int
        /// The expanded text last set, and where its picture is drawn (nil: it shows nothing).
        var text: String?
        var destination: PixelRect?
        /// Times the text was set (rasterised and uploaded).
        var sets = 0

        init(overlay: TextOverlay, template: TextTemplate, renderer: TextRenderer, id: Int) {
            self.overlay = overlay; self.template = template; self.renderer = renderer; self.id = id
        }
    }

    /// Overlay picture ids of texts start here (image overlays have 0, 1, ...).
    static let firstID = 1_000_000

    /// The fonts read so far, by path (a font is read once a take).
    private(set) var fonts: [String: FontFile]
    /// Each output's texts, by output key.
    private var outputs: [Int: [Shown]] = [:]
    private var nextID = TakeTexts.firstID
    /// The take's name (`{take}`).
    let take: String

    init(fonts: [String: FontFile], take: String) {
        self.fonts = fonts; self.take = take
    }

    /// Whether any output has a text.
    var isEmpty: Bool { outputs.values.allSatisfy(\.isEmpty) }

    /// Every text of `config`, each with its field (`texts[0]`, `alsoOut[1].texts[0]`).
    static func all(_ config: TakeConfiguration) -> [(field: String, text: TextOverlay)] {
        config.texts.enumerated().map { ("texts[\($0.offset)]", $0.element) }
            + config.extraOutputs.enumerated().flatMap { i, s in s.texts.enumerated().map { ("alsoOut[\(i)].texts[\($0.offset)]", $0.element) } }
    }

    /// Reads the fonts `texts` use that are not read yet and checks that
    /// each text can be set (libraries, font, size): a one-line
    /// configuration error naming `field` and the input otherwise. A font
    /// a text names is a file the take reads: it is checked against
    /// `policy` (a server's input root); the default font is the machine's own.
    static func loadFonts(_ texts: [(field: String, text: TextOverlay)], policy: SourcePolicy,
                          into fonts: inout [String: FontFile]) throws(ConfigurationError) {
        for (field, t) in texts {
            let path = t.fontPath
            if fonts[path] == nil {
                if t.font != nil {
                    let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
                    if case .failure(let r) = policy.checkFile(resolved: resolved, as: path) {
                        throw ConfigurationError(field: "\(field).font", value: path, reason: r.reason)
                    }
                }
                do { fonts[path] = try FontFile(path: path) } catch {
                    switch error {
                    case .library(let why): throw ConfigurationError(field: field, value: t.text, reason: why)
                    case .font(_, let why):
                        throw ConfigurationError(field: "\(field).font", value: path,
                                                 reason: why + (t.font == nil ? " (the default font; install fonts-dejavu-core or name a font)" : ""))
                    case .render(let why): throw ConfigurationError(field: "\(field).font", value: path, reason: why)
                    }
                }
            }
            do { _ = try TextRenderer(font: fonts[path]!, overlay: t) } catch {
                throw ConfigurationError(field: field, value: t.text, reason: error.description)
            }
        }
    }

    /// Gives output `key` these texts from its next frame on (the fonts must
    /// be read: `loadFonts`); the pictures of the texts it had are removed.
    func set(_ texts: [TextOverlay], output key: Int, gpu: GPUStage) throws(ConfigurationError) {
        var shown: [Shown] = []
        for (i, t) in texts.enumerated() {
            let field = "texts[\(i)]"
            guard let font = fonts[t.fontPath] else { throw ConfigurationError(field: "\(field).font", value: t.fontPath, reason: "was not read when the take started") }
            do {
                shown.append(Shown(overlay: t, template: try TextTemplate(parsing: t.text, field: "\(field).text"),
                                   renderer: try TextRenderer(font: font, overlay: t), id: nextID))
            } catch let e as ConfigurationError {
                throw e
            } catch {
                throw ConfigurationError(field: field, value: t.text, reason: "\(error)")
            }
            nextID += 1
        }
        remove(output: key, gpu: gpu)
        outputs[key] = shown
    }

    /// Adds fonts read beside the take (a PATCH's) to those it has.
    func add(fonts more: [String: FontFile]) { fonts.merge(more) { a, _ in a } }

    /// How many times each of output `key`'s texts was set, in order.
    func setCounts(output key: Int) -> [Int] { outputs[key]?.map(\.sets) ?? [] }

    /// Removes output `key`'s texts and their pictures.
    func remove(output key: Int, gpu: GPUStage) {
        for s in outputs.removeValue(forKey: key) ?? [] { try? gpu.setText(s.id, nil) }
    }

    /// Output `key`'s text draws for the frame `clock` describes, each text
    /// set again where its expanded text changed; `order` is where its
    /// overlays of a layer start (after its images). A text FreeType cannot
    /// set is left out with a warning.
    func draws(output key: Int, clock: TextClock, canvas: PixelSize, order: Int, gpu: GPUStage,
               warn: (String) -> Void) throws(GPUError) -> [DrawDescription] {
        guard let shown = outputs[key], !shown.isEmpty else { return [] }
        var out: [DrawDescription] = []
        for (i, s) in shown.enumerated() {
            let text = s.template.expand(clock)
            if text != s.text {
                s.text = text
                s.sets += 1
                do {
                    let r = try s.renderer.render(text, canvas: canvas)
                    try gpu.setText(s.id, r?.image)
                    s.destination = r?.destination
                } catch let e as GPUError {
                    throw e
                } catch {
                    warn("text '\(ConfigurationError.quoted(text))' cannot be set: \(error); not shown")
                    try gpu.setText(s.id, nil)
                    s.destination = nil
                }
            }
            if let d = s.destination { out.append(s.overlay.draw(id: s.id, destination: d, order: order + i)) }
        }
        return out
    }
}
