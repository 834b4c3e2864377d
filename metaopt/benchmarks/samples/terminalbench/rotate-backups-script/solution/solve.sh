#!/bin/bash
cat > /app/rotate.sh <<'SH'
#!/bin/bash
# rotate.sh DIR KEEP: keep the KEEP newest backup-YYYYMMDD.tar.gz files in DIR.
usage() { echo "usage: $0 DIR KEEP" >&2; exit 2; }
[ "$#" -eq 2 ] || usage
dir=$1 keep=$2
[ -d "$dir" ] || { echo "error: $dir is not a directory" >&2; exit 2; }
[[ "$keep" =~ ^[0-9]+$ ]] || { echo "error: KEEP must be a non-negative integer" >&2; exit 2; }
mapfile -t backups < <(find "$dir" -maxdepth 1 -type f -regextype posix-extended \
    -regex '.*/backup-[0-9]{8}\.tar\.gz' -printf '%f\n' | sort)
n=${#backups[@]}
drop=$(( n > keep ? n - keep : 0 ))
for ((i = 0; i < drop; i++)); do
    rm -f -- "$dir/${backups[i]}"
    echo "${backups[i]}"
done
exit 0
SH
chmod 755 /app/rotate.sh
/app/rotate.sh /app/samples/db 3 || true
ls /app/samples/db
