import hashlib
import os
from pathlib import Path

DEPLOY = Path("/app/deploy")
RENDERED = DEPLOY / "rendered"

EXPECTED = {
    "conf.d/upstream.conf": """upstream shop_app {
    server 10.20.0.15:8081 max_fails=3 fail_timeout=10s;
    keepalive 16;
}
""",
    "conf.d/ssl.conf": """ssl_certificate /etc/ssl/shop/fullchain.pem;
ssl_certificate_key /etc/ssl/shop/privkey.pem;
ssl_protocols TLSv1.2 TLSv1.3;
ssl_session_cache shared:SSL:10m;
""",
    "conf.d/gzip.conf": """gzip on;
gzip_min_length 1024;
gzip_types text/css application/javascript application/json;
gzip_vary on;
""",
    "sites-available/shop.conf": """server {
    listen 443 ssl;
    server_name shop.example.com;
    client_max_body_size 25m;

    location /static/ {
        root /srv/shop/static;
        expires 7d;
    }

    location / {
        proxy_pass http://shop_app;
        proxy_set_header Host $host;
        proxy_set_header X-Real-IP $remote_addr;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
    }
}
""",
    "sites-available/shop-redirect.conf": """server {
    listen 80;
    server_name shop.example.com;
    return 301 https://$host$request_uri;
}
""",
}
TEMPLATE_SHA256 = {
    "templates/upstream.conf.tmpl": "8aa57494833c6b7882c0b50da29f12451820b1717106ce35f0479eb16a95fd91",
    "templates/site.conf.tmpl": "2184b3ba934eda01441caca37d11d054431ac0512288fcc13bdba5a37e0fd834",
    "env/production.env": "814c6b57f6c601caa3ef28622cf35ebc028599b4c1decf105bc4d1915871ab5e",
}


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_inputs_unchanged():
    for rel, digest in TEMPLATE_SHA256.items():
        assert sha256(DEPLOY / rel) == digest, f"{rel} was modified"


def test_rendered_files():
    for rel, text in EXPECTED.items():
        path = RENDERED / rel
        assert path.is_file() and not path.is_symlink(), f"{path} is missing"
        assert path.read_text() == text, f"{rel} is not rendered correctly"


def test_no_placeholders_left():
    for path in RENDERED.rglob("*"):
        if path.is_file():
            assert "${" not in path.read_text(), f"{path} still has a placeholder"


def test_sites_enabled_symlinks():
    for name in ["shop.conf", "shop-redirect.conf"]:
        link = RENDERED / "sites-enabled" / name
        assert link.is_symlink(), f"{link} is not a symlink"
        assert os.readlink(link) == f"../sites-available/{name}", os.readlink(link)
        assert link.read_text() == EXPECTED[f"sites-available/{name}"]
    assert sorted(p.name for p in (RENDERED / "sites-enabled").iterdir()) == ["shop-redirect.conf", "shop.conf"]


def test_manifest():
    manifest = RENDERED / "MANIFEST"
    assert manifest.is_file(), f"{manifest} is missing"
    expected = "".join(f"{sha256(RENDERED / rel)}  {rel}\n" for rel in sorted(EXPECTED))
    assert manifest.read_text() == expected
