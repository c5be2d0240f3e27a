import Testing
@testable import DiptychCore

@Suite struct OrientationMappingTests {
    // docs/ARCHITECTURE.md, "Explicit orientation": portrait canvas, rotation 90.
    @Test func primaryRotation90() {
        let o = Orientation(rotation: .r90)
        let s = o.sensorPoint(fromUpright: NormalizedPoint(x: 0.25, y: 0.1))
        #expect(s == NormalizedPoint(x: 0.1, y: 0.75))
    }
    @Test func mirroredSecondaryRotation90() {
        let o = Orientation(rotation: .r90, mirrored: true)
        let s = o.sensorPoint(fromUpright: NormalizedPoint(x: 0.25, y: 0.1))
        #expect(s == NormalizedPoint(x: 0.1, y: 0.25))
    }
    @Test(arguments: Rotation.allCases, [false, true])
    func roundTrip(rotation: Rotation, mirrored: Bool) {
        let o = Orientation(rotation: rotation, mirrored: mirrored)
        for i in 0...4 { for j in 0...4 {
            let p = NormalizedPoint(x: Double(i) / 4, y: Double(j) / 4)
            #expect(o.uprightPoint(fromSensor: o.sensorPoint(fromUpright: p)) == p)
        } }
    }
}
