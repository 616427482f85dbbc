"""The image's HEALTHCHECK: GET /health on the server's port ($PORT); exit 0 when it answers 200.

`container-health.py /ready` checks readiness instead (the models loaded), with the API key of
the environment or of /data/api-key. The image has no curl: this is Python's urllib.
"""

import os
import sys
import urllib.request
from pathlib import Path

KEY_FILE = Path(os.environ.get("XDG_DATA_HOME", "/data")) / "api-key"  # container-start's


def main(path: str = "/health") -> int:
    url = f"http://127.0.0.1:{os.environ.get('PORT', '8080')}{path}"
    request = urllib.request.Request(url)
    key = os.environ.get("OFFLINE_ASSISTANT_API_KEY") or (KEY_FILE.is_file() and KEY_FILE.read_text().strip())
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return 0 if reply.status == 200 else 1
    except OSError as error:
        print(f"{url}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
