#!/bin/sh
# The image's entry point (after tini), for `serve`:
# - it listens on $PORT (8080 unless the platform sets it, as Cloud Run does) when no --port is given;
# - on 0.0.0.0 it needs an API key: with none in OFFLINE_ASSISTANT_API_KEY, one is generated on the
#   first start, kept in the data volume (/data/api-key) and printed, so that
#   `docker run -p 8080:8080 IMAGE` serves at once, and never without a key.
# Any other command (`offline-assistant-cli ask ...`, `bash`) runs as given.
set -eu
KEY_FILE="${XDG_DATA_HOME:-/data}/api-key"
case " $* " in
  *" serve "*)
    case " $* " in
      *" --port "* | *" --port="*) ;;
      *) set -- "$@" --port "${PORT:-8080}" ;;
    esac
    if [ -z "${OFFLINE_ASSISTANT_API_KEY:-}" ]; then
      if [ ! -s "$KEY_FILE" ]; then
        (umask 077 && python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > "$KEY_FILE")
        echo "No OFFLINE_ASSISTANT_API_KEY was given: generated one into $KEY_FILE." >&2
      fi
      OFFLINE_ASSISTANT_API_KEY="$(cat "$KEY_FILE")"
      export OFFLINE_ASSISTANT_API_KEY
      echo "API key (clients send 'Authorization: Bearer KEY'): $OFFLINE_ASSISTANT_API_KEY" >&2
    fi ;;
esac
exec "$@"
