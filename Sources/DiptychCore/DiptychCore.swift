// DiptychCore: pure Swift geometry, layouts, orientation, the frame clock,
// policies and configuration. No C, no GPU, no FFmpeg.
