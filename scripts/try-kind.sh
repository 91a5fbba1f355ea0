#!/usr/bin/env bash
# A cluster you can try without an NPU: kind (Kubernetes in Docker), the simulator render of
# `ge-plugin deploy k8s --simulator`, and the checks an operator makes before trusting a rollout: the probes
# pass, a rollout finishes, a drain respects the PodDisruptionBudget, the HPA reads its metric.
#
# Needs Docker, kind and kubectl on PATH, and a serving image built from the rendered Dockerfile on a base
# that has no CANN (the simulator needs none: give any Debian/Ubuntu python3.11+ image and CANN_SET_ENV=/dev/null):
#   scripts/try-kind.sh IMAGE
# Our machines have no Docker engine: this script is documented (docs/deploy.md), not run by the tests.
set -euo pipefail

image=${1:?usage: scripts/try-kind.sh IMAGE (a serving image built from the rendered Dockerfile)}
cluster=${GE_PLUGIN_KIND_CLUSTER:-ge-plugin}
out=${GE_PLUGIN_KIND_DIR:-build/kind}
cd "$(dirname "$0")/.."

kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster" --config - <<'EOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
  - role: worker
EOF
kind load docker-image "$image" --name "$cluster"

# The models: an image holding the repository (no shared volume in kind), built from the render's models.Dockerfile.
ge-plugin demo-models build/models
ge-plugin atc specs/bert.yaml --sim
ge-plugin render specs/bert.yaml -o model_repository
ge-plugin deploy k8s specs/bert.yaml -o "$out" --simulator --image "$image" --cpu 2 --memory 4Gi \
  --models-image ge-plugin-models:try --min-replicas 2 --max-replicas 3
docker build -f "$out/models.Dockerfile" -t ge-plugin-models:try .
kind load docker-image ge-plugin-models:try --name "$cluster"

kubectl apply -k "$out"
name=$(kubectl get deployment -l app.kubernetes.io/name=ge-plugin -o jsonpath='{.items[0].metadata.name}')

echo "== probes and a rollout: both replicas ready"
kubectl rollout status "deployment/$name" --timeout=15m
kubectl get pods -l "app.kubernetes.io/instance=$name" -o wide

echo "== a rollout of a change: one pod at a time (maxSurge 0), every model ready again"
kubectl set env "deployment/$name" GE_PLUGIN_TRY_ROLLOUT="$(date +%s)"
kubectl rollout status "deployment/$name" --timeout=15m

echo "== a drain: the PodDisruptionBudget lets one pod go at a time"
node=$(kubectl get pods -l "app.kubernetes.io/instance=$name" -o jsonpath='{.items[0].spec.nodeName}')
kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout=10m
kubectl get pdb "$name"
kubectl uncordon "$node"
kubectl rollout status "deployment/$name" --timeout=15m

echo "== one inference through the Service"
kubectl run "try-$RANDOM" --rm -i --restart=Never --image=curlimages/curl --command -- \
  curl -sf "http://$name:8000/v2/models/bert_model/ready" && echo ready

echo "== the HPA (its metric needs Prometheus and the adapter: prometheus-adapter/values.yaml)"
kubectl get hpa "$name"
