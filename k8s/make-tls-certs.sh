#!/bin/sh
# The platform's private CA and one certificate per service, with openssl
# only, for clusters without cert-manager (k8s/README.md, "Mutual TLS between
# services"). Writes DIR/ca.crt, DIR/ca.key and DIR/<name>.crt, DIR/<name>.key;
# an existing CA in DIR is reused, the service certificates are made anew.
#
#   k8s/make-tls-certs.sh DIR [NAMESPACE [CLUSTER_DOMAIN]]
#
# Each certificate names its service the way the platform's internal servers
# read it: subject CN=<name> and URI SAN spiffe://platform/<name>. Server
# certificates carry the Service's DNS names, localhost and 127.0.0.1; the
# tenant workers share one identity (runtime-worker) whose Services are made
# at run time, hence wildcard names; operator is a client certificate only.
set -eu
dir=${1:?usage: make-tls-certs.sh DIR [NAMESPACE [CLUSTER_DOMAIN]]}
ns=${2:-agent-platform}
domain=${3:-cluster.local}
umask 077
mkdir -p "$dir"
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

if [ ! -s ca.key ] || [ ! -s ca.crt ]; then
  key ca.key
  openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=platform internal CA" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.crt
fi

issue() {
  name=$1 usage=$2 sans=$3
  key "$name.key"
  openssl req -new -key "$name.key" -subj "/CN=$name" -out "$name.csr"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyAgreement" \
    "extendedKeyUsage=$usage" "subjectAltName=$sans" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAserial ca.srl -CAcreateserial \
    -sha256 -days 365 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
  chmod 644 "$name.crt"
}

for name in identity compute agents runtime-router; do
  issue "$name" serverAuth,clientAuth \
    "URI:spiffe://platform/$name,DNS:$name,DNS:$name.$ns,DNS:$name.$ns.svc,DNS:$name.$ns.svc.$domain,DNS:localhost,IP:127.0.0.1"
done
issue runtime-worker serverAuth,clientAuth \
  "URI:spiffe://platform/runtime-worker,DNS:*.$ns.svc,DNS:*.$ns.svc.$domain,DNS:localhost,IP:127.0.0.1"
issue operator clientAuth "URI:spiffe://platform/operator"
chmod 644 ca.crt
echo "made in $dir: ca.crt ca.key identity compute agents runtime-router runtime-worker operator (.crt .key)"
