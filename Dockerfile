# ort-serve as a container: Debian 12, built from this source tree, the
# KServe custom-runtime conventions (models under /mnt/models, port 8080).
# The RUN commands of the build stage are the README's install steps
# ("Serving"), word for word: tests/serve/deploy_test.py checks it.
# Untested here: there is no Docker engine or cluster on the machines this
# project is built on (docs/SERVING.md).
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev pkg-config cmake meson ninja-build protobuf-c-compiler libprotobuf-c-dev libnng-dev libcjson-dev libseccomp-dev libonnx-dev python3 python3-numpy python3-onnx
COPY . /src
WORKDIR /src
RUN meson setup build-serve --prefix=/opt/ortmk -Dtests=false -Dvulkan=disabled -Dcuda=disabled && meson install -C build-serve

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends libnng1 libcjson1 libprotobuf-c1 libseccomp2 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/ortmk /opt/ortmk
USER 1000
EXPOSE 8080
ENTRYPOINT ["/opt/ortmk/bin/ort-serve"]
CMD ["--model-repository", "/mnt/models", "--http-port", "8080"]
