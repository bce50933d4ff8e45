# ckpt in a container: Debian 12, built without LibTorch, so `summary`, `check` and `diff` work and
# `load` exits 4. Build: docker build -t ckpt .   Run: docker run --rm -v "$PWD:/data" ckpt check /data/model.pt
# scripts/check-dockerfile.sh checks this file without docker (packages exist, runtime libraries covered).

FROM debian:12 AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ cmake make zlib1g-dev libdeflate-dev libcli11-dev libfmt-dev \
      nlohmann-json3-dev libsimdjson-dev libcurl4-openssl-dev python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DCKPT_WITH_TORCH=OFF -DCKPT_BUILD_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" \
 && DESTDIR=/install cmake --install /build --prefix /usr

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libfmt9 libsimdjson14 libstdc++6 libgcc-s1 zlib1g libdeflate0 libcurl4 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /install/usr/ /usr/
RUN useradd --create-home --uid 1000 ckpt
USER ckpt
WORKDIR /data
ENTRYPOINT ["ckpt"]
CMD ["--help"]
