#!/usr/bin/python3
"""The deployment files agree with each other and with ort-serve, since no
Docker engine or cluster is here to try them (docs/SERVING.md):
  - the Dockerfile's build-stage and runtime-stage RUN commands are the
    README's install steps, word for word;
  - the runtime stage installs the Debian package of every shared library
    that the built ort-serve and ort-ep-cpu load (or one that depends on it);
  - deploy/kserve/*.yaml parse, are a ClusterServingRuntime and an
    InferenceService that names it, run the README's image with flags
    ort-serve accepts, probe endpoints ort-serve serves (asked of a real
    ort-serve on 127.0.0.1), on the port it listens on.

usage: deploy_test.py SOURCE_DIR ORT_SERVE ORT_EP_CPU WORKDIR"""
import os
import re
import shutil
import subprocess
import sys

import yaml

from serve_lib import Server, http

FAILS = []


def check(cond, what):
    print("%s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)


def dockerfile_stages(path):
    """[[RUN command, ...] per stage] and the last stage's ENTRYPOINT+CMD."""
    stages, cmd = [], []
    with open(path) as f:
        text = re.sub(r"\\\n\s*", "", f.read())
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            stages.append([])
        elif line.startswith("RUN "):
            stages[-1].append(line[4:].strip())
        elif line.startswith(("ENTRYPOINT ", "CMD ")):
            cmd += yaml.safe_load(line.split(" ", 1)[1])
    return stages, cmd


def readme_block(path, marker):
    """The command lines of the ```sh block after <!-- Dockerfile: marker -->."""
    with open(path) as f:
        text = f.read()
    m = re.search(r"<!-- Dockerfile: %s -->\s*```sh\n(.*?)```" % marker, text, re.S)
    return [l.strip() for l in m.group(1).splitlines() if l.strip()] if m else None


def packages_of(cmd):
    words = cmd.split("&&")[1].split() if "&&" in cmd else []
    return {w for w in words if not w.startswith("-") and w not in ("apt-get", "install")}


def owner(lib):
    for p in (lib, "/usr" + lib if lib.startswith("/lib") else lib):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0]
    return None


def test_dockerfile(src, binaries):
    stages, cmd = dockerfile_stages(os.path.join(src, "Dockerfile"))
    readme = os.path.join(src, "README.md")
    check(len(stages) == 2, "Dockerfile: a build and a runtime stage")
    check(stages[0] == readme_block(readme, "build"),
          "the build stage's RUN commands are the README's install steps")
    check(stages[1] == readme_block(readme, "runtime"),
          "the runtime stage's RUN command is the README's")
    with open(os.path.join(src, "Dockerfile")) as f:
        check(f.readline().startswith("#") and "FROM debian:12 AS build" in f.read(),
              "Debian 12 base")
    check(cmd[:1] == ["/opt/ortmk/bin/ort-serve"] and "/mnt/models" in cmd and "8080" in cmd,
          "the image runs ort-serve on /mnt/models, port 8080 (%r)" % cmd)
    runtime = packages_of(stages[1][0]) if stages[1:] else set()
    deps = set(runtime)
    for p in runtime:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", p], capture_output=True,
                           text=True)
        deps |= {d.split()[0] for d in r.stdout.split(",") if d.strip()}
    for b in binaries:
        out = subprocess.run(["ldd", b], capture_output=True, text=True).stdout
        for lib in re.findall(r"=> (/\S+)", out):
            if "ortmk" in lib:
                continue
            pkg = owner(lib)
            check(pkg is not None and (pkg.startswith("libc6") or pkg in deps),
                  "%s: %s (%s) is installed by the runtime stage" %
                  (os.path.basename(b), os.path.basename(lib), pkg))


def load_yaml(src, name):
    with open(os.path.join(src, "deploy", "kserve", name)) as f:
        return yaml.safe_load(f)


def test_yaml(src, serve_bin, work):
    rt = load_yaml(src, "clusterservingruntime.yaml")
    isvc = load_yaml(src, "inferenceservice.yaml")
    check(rt["apiVersion"] == "serving.kserve.io/v1alpha1" and
          rt["kind"] == "ClusterServingRuntime", "a ClusterServingRuntime")
    check(isvc["apiVersion"] == "serving.kserve.io/v1beta1" and
          isvc["kind"] == "InferenceService", "an InferenceService")
    model = isvc["spec"]["predictor"]["model"]
    check(model["runtime"] == rt["metadata"]["name"] and model["protocolVersion"] == "v2" and
          model["modelFormat"]["name"] in [f["name"] for f in rt["spec"]["supportedModelFormats"]],
          "the InferenceService uses the runtime, its model format and protocol v2")
    check("v2" in rt["spec"]["protocolVersions"], "the runtime speaks protocol v2")
    c = rt["spec"]["containers"][0]
    with open(os.path.join(src, "README.md")) as f:
        check("docker build -t %s ." % c["image"] in f.read(), "the image is the README's tag")
    args, port = c["args"], c["ports"][0]["containerPort"]
    check(args[args.index("--model-repository") + 1] == "/mnt/models" and
          int(args[args.index("--http-port") + 1]) == port == 8080,
          "/mnt/models and port 8080, as KServe expects")
    # the probes and the metrics path against a real ort-serve, with the
    # runtime's own arguments (but the repository and a free port)
    repo = os.path.join(work, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(repo)
    flags = [a for i, a in enumerate(args) if a not in ("--model-repository", "--http-port")
             and args[i - 1] not in ("--model-repository", "--http-port")]
    with Server(serve_bin, repo, *flags) as srv:
        for probe in ("readinessProbe", "livenessProbe"):
            path = c[probe]["httpGet"]["path"]
            check(c[probe]["httpGet"]["port"] == port and http(srv, "GET", path)[0] == 200,
                  "%s %s answers 200" % (probe, path))
        path = rt["spec"]["annotations"]["prometheus.kserve.io/path"]
        check(http(srv, "GET", path)[0] == 200, "the metrics path %s answers 200" % path)


def main():
    src, serve_bin, ep_cpu, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    test_dockerfile(src, [serve_bin, ep_cpu])
    test_yaml(src, serve_bin, work)
    print("deploy_test: %s (%d failed)" % ("FAILED" if FAILS else "passed", len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
