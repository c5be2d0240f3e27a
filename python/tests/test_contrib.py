"""The KubeRay sample in contrib/ is a RayCluster whose GPU workers
advertise diptych_pairs the way diptych.ray places takes by it."""
import json
import pathlib

import yaml

from diptych.ray.capacity import RESOURCE

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_kuberay_sample_advertises_pairs_on_gpu_workers():
    doc = yaml.safe_load((ROOT / "contrib" / "kuberay-raycluster.yaml").read_text())
    assert doc["apiVersion"] == "ray.io/v1" and doc["kind"] == "RayCluster"
    assert doc["spec"]["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    groups = doc["spec"]["workerGroupSpecs"]
    assert groups
    for group in groups:
        # KubeRay passes the value to `ray start --resources=` as it is: a quoted JSON object.
        raw = group["rayStartParams"]["resources"]
        resources = json.loads(json.loads(raw))
        assert isinstance(resources[RESOURCE], int) and resources[RESOURCE] >= 1, raw
        container = group["template"]["spec"]["containers"][0]
        assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
        env = {e["name"]: e["value"] for e in container.get("env", [])}
        assert set(env["NVIDIA_DRIVER_CAPABILITIES"].split(",")) >= {"graphics", "video", "compute", "utility"}
