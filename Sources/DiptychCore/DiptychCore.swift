// DiptychCore: pure Swift geometry, layouts, orientation, the frame clock,
// policies and configuration. No C, no GPU, no FFmpeg; Foundation (or
// FoundationEssentials) only for JSON files.
//
// Map of the module (one main type per file):
//   Geometry, Geometry+Alignment  sizes, rects, points, orientation; even-pixel rules for 4:2:0
//   StreamGeometry                sensor size + orientation; ContentMode (aspect fill / fit)
//   Layout, PiPPlacement          arrangements → CompositionPlan (DrawDescription per draw)
//   CompositionPlan+PointMapping  canvas ⇄ sensor points ("tap to focus")
//   AffineTransform2D             one per-draw local → sensor (texture) uv map for shaders
//   FrameClock                    primary-driven pairing of secondary frames (docs/ARCHITECTURE.md, "One clock")
//   ThermalPolicy, StoragePolicy, CostBudget   "Cost budget and rollback" and "Failure paths" as pure functions
//   TakeConfiguration             `diptych record` flags + JSON config, validation
//   MediaOptions, MediaTime, VideoFrame        shared media vocabulary
