# groupcoord in a container: docker build -t groupcoord . && docker run -p 9092:9092 -v gc-data:/data groupcoord
FROM python:3.11-slim

RUN useradd --system --uid 10001 --home-dir /data groupcoord \
    && mkdir -p /data && chown groupcoord /data
WORKDIR /opt/groupcoord
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY coordinator ./coordinator
COPY pipeline ./pipeline
RUN pip install --no-cache-dir . && rm -rf /root/.cache

USER groupcoord
VOLUME ["/data"]
EXPOSE 9092
# Clients connect to the advertised address: override it with --set advertised.listeners=HOST:9092
# when clients reach the container under another name.
ENTRYPOINT ["groupcoord"]
CMD ["serve", "--data-dir", "/data", "--listen", "0.0.0.0:9092", "--set", "advertised.listeners=localhost:9092"]
