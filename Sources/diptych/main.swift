import Diptych
import DiptychMedia
import Foundation

let usage = """
usage: diptych <command> [options]

commands:
  demo       synthetic streams composited into demo.mp4 + demo.png
  record     --primary SRC --secondary SRC --out FILE|URL [options]
  probe      EGL platform/GPU, GL renderer, encoders, VA-API profiles, library versions
  bench      layouts x sizes x formats -> table + JSON

options:
  -h, --help     show this help
  --version      print the version
"""

let args = Array(CommandLine.arguments.dropFirst())
switch args.first {
case nil, "-h", "--help", "help":
    print(usage)
case "--version":
    print("diptych \(DiptychVersion.string)")
case "probe":
    print("diptych \(DiptychVersion.string)")
    for (name, version) in MediaLibraries.versions { print("\(name) \(version)") }
default:
    FileHandle.standardError.write(Data("diptych: unknown command '\(args[0])' (see diptych --help)\n".utf8))
    exit(2)
}
