// Offline validation of deploy/k8s: every object of kustomization.yaml's resources (and of
// `kubectl kustomize`'s output when kubectl is given) is checked against its Kubernetes JSON schema
// with npm kubernetes-models (KEDA's ScaledObject with @kubernetes-models/keda), then against what
// inferd needs: probes on inferd's health endpoints, a preStop drain, resources, Service and
// autoscaler targets that name the Deployments, an adapter rule for the HPA's custom metric that
// reads a metric inferd exports. kubernetes-models' schemas accept unknown fields, so these
// checks pin the fields that matter; --self-test proves the schemas do reject wrong types.
//
//   node validate.mjs --dir deploy/k8s --metrics-source src/server/metrics.cc [--kubectl kubectl]
//                     [--self-test]
// Exit 0 when everything passes; 1 with one line per problem.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { parseAllDocuments, parse } from "yaml";
import { Deployment } from "kubernetes-models/apps/v1";
import { Service, ConfigMap } from "kubernetes-models/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";

const MODELS = {
  "apps/v1/Deployment": Deployment,
  "v1/Service": Service,
  "v1/ConfigMap": ConfigMap,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
};

function args() {
  const out = { kubectl: null, selfTest: false };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; ++i) {
    if (a[i] === "--dir") out.dir = a[++i];
    else if (a[i] === "--metrics-source") out.metricsSource = a[++i];
    else if (a[i] === "--kubectl") out.kubectl = a[++i];
    else if (a[i] === "--self-test") out.selfTest = true;
    else throw new Error(`unknown argument ${a[i]}`);
  }
  if (!out.dir || !out.metricsSource) throw new Error("--dir and --metrics-source are required");
  return out;
}

function parseDocs(text, where) {
  return parseAllDocuments(text).map((d) => {
    if (d.errors.length) throw new Error(`${where}: ${d.errors[0].message}`);
    return d.toJS();
  }).filter((o) => o !== null);
}

// The schema errors of `obj`, or [] when it validates.
function schemaErrors(obj) {
  const key = `${obj.apiVersion}/${obj.kind}`;
  const Model = MODELS[key];
  if (!Model) return [`no schema for ${key} (add it to validate.mjs)`];
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    return [String(e.message).split("\n")[0]];
  }
}

const byKind = (objs, kind, name) => objs.find((o) => o.kind === kind && o.metadata?.name === name);

function checkServer(objs, problems) {
  const d = byKind(objs, "Deployment", "inferd");
  if (!d) return problems.push("no Deployment 'inferd'");
  const c = d.spec.template.spec.containers[0];
  const port = (name) => c.ports?.find((p) => p.name === name)?.containerPort;
  if (c.readinessProbe?.httpGet?.path !== "/v2/health/ready") problems.push("inferd: readiness probe is not /v2/health/ready");
  if (c.livenessProbe?.httpGet?.path !== "/v2/health/live") problems.push("inferd: liveness probe is not /v2/health/live");
  if (!c.lifecycle?.preStop) problems.push("inferd: no preStop drain");
  if (!c.resources?.requests?.cpu) problems.push("inferd: no CPU request (the HPA's utilization is a share of it)");
  const flag = (f) => c.args?.find((a) => a.startsWith(`--${f}=`))?.split("=")[1];
  for (const [f, p] of [["http-port", "http"], ["grpc-port", "grpc"], ["metrics-port", "metrics"]]) {
    if (Number(flag(f)) !== port(p)) problems.push(`inferd: --${f} ${flag(f)} is not the '${p}' containerPort ${port(p)}`);
  }
  if (flag("host") !== "0.0.0.0") problems.push("inferd: --host must be 0.0.0.0 in a pod (probes come from the node)");
  const grace = d.spec.template.spec.terminationGracePeriodSeconds ?? 30;
  if (grace <= Number(flag("exit-timeout-secs") ?? 30)) problems.push("inferd: terminationGracePeriodSeconds leaves no time for the drain");
  const ann = d.spec.template.metadata.annotations ?? {};
  if (Number(ann["prometheus.io/port"]) !== port("metrics")) problems.push("inferd: prometheus.io/port is not the metrics port");
  const labels = d.spec.template.metadata.labels;
  const s = byKind(objs, "Service", "inferd");
  if (!s) problems.push("no Service 'inferd'");
  else for (const [k, v] of Object.entries(s.spec.selector)) {
    if (labels[k] !== v) problems.push(`Service inferd selects ${k}=${v}, the pods have ${labels[k]}`);
  }
  for (const [k, v] of Object.entries(d.spec.selector.matchLabels)) {
    if (labels[k] !== v) problems.push(`Deployment inferd selector ${k}=${v} does not match its pods`);
  }
}

function checkAutoscalers(objs, metricNames, problems) {
  const h = byKind(objs, "HorizontalPodAutoscaler", "inferd");
  if (!h) return problems.push("no HorizontalPodAutoscaler 'inferd'");
  if (h.spec.scaleTargetRef.kind !== "Deployment" || !byKind(objs, "Deployment", h.spec.scaleTargetRef.name)) {
    problems.push("HPA inferd does not target a Deployment of the kustomization");
  }
  const cpu = h.spec.metrics.find((m) => m.type === "Resource" && m.resource.name === "cpu");
  if (cpu?.resource.target.averageUtilization !== 70) problems.push("HPA inferd: no CPU target of 70%");
  const pods = h.spec.metrics.find((m) => m.type === "Pods");
  if (!pods) return problems.push("HPA inferd: no per-pod request-rate metric");
  // The adapter must serve that metric, from a series inferd exports.
  const cm = byKind(objs, "ConfigMap", "prometheus-adapter");
  if (!cm) return problems.push("no ConfigMap 'prometheus-adapter'");
  const rules = parse(cm.data["config.yaml"]).rules ?? [];
  const rule = rules.find((r) => r.name?.as === pods.pods.metric.name);
  if (!rule) problems.push(`no adapter rule serves '${pods.pods.metric.name}'`);
  for (const r of rules) {
    const series = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(r.seriesQuery)?.[1];
    if (!metricNames.has(series)) problems.push(`adapter rule reads '${series}', which inferd does not export`);
    if (!r.resources?.overrides?.pod) problems.push(`adapter rule '${series}' is not per pod`);
  }
  const so = byKind(objs, "ScaledObject", "inferd-worker");
  if (!so) return problems.push("no ScaledObject 'inferd-worker'");
  const w = byKind(objs, "Deployment", so.spec.scaleTargetRef.name);
  if (!w) return problems.push("ScaledObject inferd-worker does not target a Deployment of the kustomization");
  const t = so.spec.triggers.find((x) => x.type === "redis-streams");
  if (!t?.metadata?.lagCount) return problems.push("ScaledObject: no redis-streams trigger on lagCount");
  const wargs = w.spec.template.spec.containers[0].args ?? [];
  const wflag = (f) => wargs.find((a) => a.startsWith(`--${f}=`))?.split("=")[1];
  if (wargs[0] !== "worker") problems.push("worker Deployment does not run `inferd worker`");
  if (wflag("stream") !== t.metadata.stream) problems.push("KEDA's stream is not the workers' --stream");
  if (wflag("group") !== t.metadata.consumerGroup) problems.push("KEDA's consumerGroup is not the workers' --group");
  if (!wflag("model-repository") || !wflag("redis")) problems.push("worker: --redis and --model-repository are required");
}

// Wrong objects the schemas must reject: proves the validation is not vacuous.
function selfTest(objs, problems) {
  const clone = (o) => structuredClone(o);
  const d = clone(byKind(objs, "Deployment", "inferd"));
  d.spec.template.spec.containers[0].ports[0].containerPort = "eight thousand";
  const h = clone(byKind(objs, "HorizontalPodAutoscaler", "inferd"));
  h.spec.metrics[0].resource.target.averageUtilization = "70%";
  const hNoMax = clone(byKind(objs, "HorizontalPodAutoscaler", "inferd"));
  delete hNoMax.spec.maxReplicas;
  const so = clone(byKind(objs, "ScaledObject", "inferd-worker"));
  delete so.spec.scaleTargetRef;
  const s = clone(byKind(objs, "Service", "inferd"));
  s.spec.ports[0].port = "8000";
  for (const [what, o] of [["containerPort string", d], ["averageUtilization string", h],
                           ["HPA without maxReplicas", hNoMax], ["ScaledObject without scaleTargetRef", so],
                           ["Service port string", s]]) {
    if (schemaErrors(o).length === 0) problems.push(`self-test: the schema accepted a ${what}`);
  }
}

function main() {
  const a = args();
  const kustomization = parse(readFileSync(join(a.dir, "kustomization.yaml"), "utf8"));
  let objs = [];
  for (const f of kustomization.resources) objs.push(...parseDocs(readFileSync(join(a.dir, f), "utf8"), f));
  const problems = [];
  if (a.kubectl) {
    const r = spawnSync(a.kubectl, ["kustomize", a.dir], { encoding: "utf8" });
    if (r.status !== 0) problems.push(`kubectl kustomize failed: ${r.stderr.trim()}`);
    else {
      const built = parseDocs(r.stdout, "kubectl kustomize");
      if (built.length !== objs.length) problems.push(`kubectl kustomize built ${built.length} objects, the files hold ${objs.length}`);
      objs = built;  // validate what `kubectl apply -k` would send
    }
  }
  for (const o of objs) {
    for (const e of schemaErrors(o)) problems.push(`${o.kind} ${o.metadata?.name}: ${e}`);
  }
  const metricNames = new Set(readFileSync(a.metricsSource, "utf8").match(/inferd_[a-z_]+/g));
  checkServer(objs, problems);
  checkAutoscalers(objs, metricNames, problems);
  if (a.selfTest) selfTest(objs, problems);
  for (const p of problems) console.log(`FAIL ${p}`);
  console.log(`${objs.length} objects (${objs.map((o) => o.kind).join(", ")}): ` +
              (problems.length ? `${problems.length} problem(s)` : "valid"));
  process.exit(problems.length ? 1 : 0);
}

main();
