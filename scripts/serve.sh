#!/usr/bin/env bash
# Serves DIR over HTTP on a random loopback port with nginx, in the background.
#   scripts/serve.sh DIR RUNDIR [RATE]
# AUTOINDEX=on lists directories (for clients that crawl them). TLS_CERT=PEM TLS_KEY=PEM serve
# HTTPS with HTTP/2 (ALPN) instead of plain HTTP, offering TLS 1.2 and 1.3 as nginx does by
# default since 1.23.4 and as the servers mirror's users fetch from do (Debian 12's nginx 1.22
# offers no TLS 1.3 unless told to). LOG_CONNECTIONS=on adds to each access-log line
# the protocol (protocol=HTTP/1.1, protocol=HTTP/2.0) and nginx's serial number of the connection
# (connection=N), so that a client's connections can be counted. ANY_PATH=NAME answers every
# path with the file DIR/NAME (a manifest of millions of urls without millions of files).
# RUNDIR receives nginx.conf, logs, nginx.pid and `port`. RATE (e.g. 40m) limits each
# response's speed so progress is visible. Stop it with: kill "$(cat RUNDIR/nginx.pid)"
set -euo pipefail
dir=$(cd "$1" && pwd)
run=$(mkdir -p "$2" && cd "$2" && pwd)
rate=${3:-0}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "nginx not found: install it with apt-get install -y nginx-light" >&2; exit 1; }

user_line=""
[ "$(id -u)" -eq 0 ] && user_line="user root;"
listen_options="" # the rest of the listen line, and the certificate's directives after it
if [ -n "${TLS_CERT:-}" ] || [ -n "${TLS_KEY:-}" ]; then
    [ -r "${TLS_CERT:-}" ] && [ -r "${TLS_KEY:-}" ] || { echo "TLS_CERT and TLS_KEY must both name readable files" >&2; exit 1; }
    listen_options=" ssl http2; ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate $(realpath "$TLS_CERT"); ssl_certificate_key $(realpath "$TLS_KEY")"
fi
any_path=""
[ -z "${ANY_PATH:-}" ] || any_path="location / { try_files /$ANY_PATH =404; }"
log_fields=""
[ "${LOG_CONNECTIONS:-off}" = on ] && log_fields=' protocol=$server_protocol connection=$connection'

for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    cat > "$run/nginx.conf" <<CONF
$user_line
worker_processes 1;
pid $run/nginx.pid;
error_log $run/error.log;
events { worker_connections 256; }
http {
    log_format mirror '\$request_method \$uri \$status range=\$http_range bytes_sent=\$body_bytes_sent$log_fields';
    access_log $run/access.log mirror;
    client_body_temp_path $run/body;
    proxy_temp_path $run/proxy;
    fastcgi_temp_path $run/fastcgi;
    uwsgi_temp_path $run/uwsgi;
    scgi_temp_path $run/scgi;
    sendfile on;
    types { }
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:$port$listen_options;
        root $dir;
        limit_rate $rate;
        autoindex ${AUTOINDEX:-off};
        $any_path
    }
}
CONF
    rm -f "$run/nginx.pid"
    if "$nginx" -c "$run/nginx.conf" -p "$run" 2>>"$run/error.log"; then
        for _ in $(seq 1 50); do
            [ -s "$run/nginx.pid" ] && break
            sleep 0.1
        done
        echo "$port" > "$run/port"
        exit 0
    fi
done
echo "nginx did not start; see $run/error.log" >&2
exit 1
