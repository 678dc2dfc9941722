# The loadgen image for deploy/kubernetes: docker build -t REGISTRY/loadgen:0.1.0 .
# Built on bookworm so the binary's glibc matches the runtime image's (Debian 12). Pinned, not
# rust:1, so a rebuild gets the same compiler; the workspace's rust-version (1.85) is a minimum.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# --locked: the image gets exactly the dependencies CI tested (Cargo.lock).
RUN cargo build --release --locked -p loadgen

# glibc, libgcc and CA certificates (/etc/ssl/certs, read by rustls-native-certs) and nothing
# else: TLS is rustls, so no OpenSSL. Runs as uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/loadgen /usr/local/bin/loadgen
ENTRYPOINT ["/usr/local/bin/loadgen"]
