"""Writes the CRD schemas tests/deploy validates the custom resources against (run it to refresh them:
``.venv/bin/python tests/deploy/schemas/build.py``). Sources, in README.md beside this file:

- ServiceMonitor: the Prometheus Operator CRD's schema as kubeconform's CRD catalog publishes it
  (datreeio/CRDs-catalog monitoring.coreos.com/servicemonitor_v1.json), descriptions dropped, and the endpoint
  fields ge-plugin never renders (authorization, basicAuth, oauth2, tlsConfig, bearerTokenSecret,
  relabelings, metricRelabelings) kept by name as plain objects/arrays.
- ServingRuntime (v1alpha1) and InferenceService (v1beta1): the fields of KServe's Go types
  (pkg/apis/serving/v1alpha1/servingruntime_types.go; v1beta1 predictor.go, component.go, podspec.go,
  inference_service.go), from which its CRDs are generated; the Kubernetes types they embed (Container,
  Volume, PodSpec...) refer to Kubernetes' own schemas (kubernetes-validate's, strict), and inlined Go structs
  (PodSpec, Container in ModelSpec) contribute their properties as the CRD generator inlines them.

Every object level ge-plugin renders has ``additionalProperties: false``: an unknown field fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate.utils as kv

HERE = Path(__file__).resolve().parent
#: the Kubernetes schemas the embedded core types refer to (kubernetes-validate's strict set)
K8S = "1.37.0"
CORE = "/api/_definitions.json#/$defs/io.k8s.api.core.v1."
APPS = "/api/_definitions.json#/$defs/io.k8s.api.apps.v1."
META = "/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1."

STRING = {"type": "string"}
BOOL = {"type": "boolean"}
INT = {"type": "integer"}
OBJECT = {"type": "object"}
ARRAY = {"type": "array"}
STRING_MAP = {"type": "object", "additionalProperties": STRING}


def ref(prefix: str, name: str) -> dict:
    return {"$ref": prefix + name}


def array_of(item: dict) -> dict:
    return {"type": "array", "items": item}


def strict(properties: dict, required: tuple[str, ...] = ()) -> dict:
    found = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        found["required"] = list(required)
    return found


def _rebased(value):
    """References local to Kubernetes' definitions file ("#/$defs/...") made to point into it from here."""
    if isinstance(value, dict):
        return {
            k: ("/api/_definitions.json" + v if k == "$ref" and v.startswith("#/") else _rebased(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_rebased(v) for v in value]
    return value


def core_properties(name: str) -> dict:
    """The properties of a Kubernetes core type, for a Go struct that inlines it."""
    definitions = kv.schema_contents(f"kubernetes-json-schema/v{K8S}-local-strict/_definitions.json", K8S)
    return _rebased(dict(definitions["$defs"]["io.k8s.api.core.v1." + name]["properties"]))


def object_schema(group_version: str, kind: str, spec: dict, extra: dict | None = None) -> dict:
    return strict(
        {
            "apiVersion": {"type": "string", "enum": [group_version]},
            "kind": {"type": "string", "enum": [kind]},
            "metadata": ref(META, "ObjectMeta"),
            "spec": spec,
            "status": OBJECT,
            **(extra or {}),
        },
        ("apiVersion", "kind", "metadata", "spec"),
    )


def service_monitor() -> dict:
    duration = {
        "type": "string",
        "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
    }
    endpoint = strict(
        {
            "authorization": OBJECT,
            "basicAuth": OBJECT,
            "bearerTokenFile": STRING,
            "bearerTokenSecret": OBJECT,
            "enableHttp2": BOOL,
            "filterRunning": BOOL,
            "followRedirects": BOOL,
            "honorLabels": BOOL,
            "honorTimestamps": BOOL,
            "interval": duration,
            "metricRelabelings": ARRAY,
            "oauth2": OBJECT,
            "params": {"type": "object", "additionalProperties": array_of(STRING)},
            "path": STRING,
            "port": STRING,
            "proxyUrl": STRING,
            "relabelings": ARRAY,
            "scheme": {"type": "string", "enum": ["http", "https"]},
            "scrapeTimeout": duration,
            "targetPort": {"anyOf": [INT, STRING]},
            "tlsConfig": OBJECT,
        }
    )
    selector = strict(
        {
            "matchExpressions": array_of(
                strict({"key": STRING, "operator": STRING, "values": array_of(STRING)}, ("key", "operator"))
            ),
            "matchLabels": STRING_MAP,
        }
    )
    spec = strict(
        {
            "attachMetadata": strict({"node": BOOL}),
            "endpoints": array_of(endpoint),
            "jobLabel": STRING,
            "labelLimit": INT,
            "labelNameLengthLimit": INT,
            "labelValueLengthLimit": INT,
            "namespaceSelector": strict({"any": BOOL, "matchNames": array_of(STRING)}),
            "podTargetLabels": array_of(STRING),
            "sampleLimit": INT,
            "selector": selector,
            "targetLabels": array_of(STRING),
            "targetLimit": INT,
        },
        ("endpoints", "selector"),
    )
    return object_schema("monitoring.coreos.com/v1", "ServiceMonitor", spec)


def serving_runtime() -> dict:
    pod = {  # ServingRuntimePodSpec
        "containers": array_of(ref(CORE, "Container")),
        "volumes": array_of(ref(CORE, "Volume")),
        "nodeSelector": STRING_MAP,
        "affinity": ref(CORE, "Affinity"),
        "tolerations": array_of(ref(CORE, "Toleration")),
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
        "imagePullSecrets": array_of(ref(CORE, "LocalObjectReference")),
        "hostIPC": BOOL,
    }
    spec = strict(
        {
            "supportedModelFormats": array_of(
                strict(
                    {
                        "name": STRING,
                        "version": STRING,
                        "autoSelect": BOOL,
                        "priority": {"type": "integer", "minimum": 1},
                    },
                    ("name",),
                )
            ),
            "multiModel": BOOL,
            "disabled": BOOL,
            "protocolVersions": array_of({"type": "string", "enum": ["v1", "v2", "grpc-v1", "grpc-v2"]}),
            "workerSpec": OBJECT,
            **pod,
            "grpcEndpoint": STRING,
            "grpcDataEndpoint": STRING,
            "httpDataEndpoint": STRING,
            "replicas": INT,
            "storageHelper": strict({"disabled": BOOL}),
            "builtInAdapter": strict(
                {
                    "serverType": STRING,
                    "runtimeManagementPort": INT,
                    "memBufferBytes": INT,
                    "modelLoadingTimeoutMillis": INT,
                    "env": array_of(ref(CORE, "EnvVar")),
                }
            ),
        },
        ("containers",),
    )
    return object_schema("serving.kserve.io/v1alpha1", "ServingRuntime", spec)


def inference_service() -> dict:
    container = core_properties("Container")  # inlined in PredictorExtensionSpec: every field optional
    model = strict(
        {
            **container,
            "modelFormat": strict({"name": STRING, "version": STRING}, ("name",)),
            "runtime": STRING,
            "storageUri": STRING,
            "runtimeVersion": STRING,
            "protocolVersion": {"type": "string", "enum": ["v1", "v2", "grpc-v1", "grpc-v2"]},
            "storage": OBJECT,
        },
        ("modelFormat",),
    )
    extension = {  # ComponentExtensionSpec
        "minReplicas": {"type": "integer", "minimum": 0},
        "maxReplicas": {"type": "integer", "minimum": 0},
        "scaleTarget": INT,
        "scaleMetric": {"type": "string", "enum": ["cpu", "memory", "concurrency", "rps"]},
        "scaleMetricType": {"type": "string", "enum": ["Utilization", "Value", "AverageValue"]},
        "autoScaling": OBJECT,
        "containerConcurrency": INT,
        "timeout": INT,
        "canaryTrafficPercent": INT,
        "logger": OBJECT,
        "batcher": OBJECT,
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
        "deploymentStrategy": ref(APPS, "DeploymentStrategy"),
    }
    frameworks = (
        "sklearn",
        "xgboost",
        "tensorflow",
        "pytorch",
        "triton",
        "onnx",
        "huggingface",
        "pmml",
        "lightgbm",
        "paddle",
    )
    predictor = strict(
        {
            **core_properties("PodSpec"),  # KServe's PodSpec: the core one with containers optional
            **{name: OBJECT for name in frameworks},
            "model": model,
            "storageUris": ARRAY,
            "workerSpec": OBJECT,
            **extension,
        }
    )
    spec = strict({"predictor": predictor, "explainer": OBJECT, "transformer": OBJECT}, ("predictor",))
    return object_schema("serving.kserve.io/v1beta1", "InferenceService", spec)


SCHEMAS = {
    "servicemonitor-monitoring-v1.json": service_monitor,
    "servingruntime-serving-v1alpha1.json": serving_runtime,
    "inferenceservice-serving-v1beta1.json": inference_service,
}

if __name__ == "__main__":
    for name, build in SCHEMAS.items():
        # an $id under kubernetes.io/api/, so "/api/_definitions.json#..." resolves to Kubernetes' schemas, as
        # it does from kubernetes-validate's own files
        schema = {"$id": f"https://kubernetes.io/api/crds/{name}", **build()}
        (HERE / name).write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        print(f"wrote {HERE / name}")
