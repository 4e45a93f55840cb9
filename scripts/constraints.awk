# The lock (constraints.txt) as the pip constraints of one set-up, shared by scripts/setup.sh and
# scripts/bundle.sh. Sections are headed "# [name]". [frameworks] is never applied as constraints (set-up
# installs PyTorch, TensorFlow and Horovod through its own settings, whose defaults those lines are);
# sections named in `drop` ("torch=reason;tensorflow=reason") stay as comments that say why, and so do
# pins of packages named in `have` (space-separated: what the environment already has and keeps).
#   awk -v drop="torch=the node's own PyTorch" -v have="numpy pandas" -f scripts/constraints.awk constraints.txt
BEGIN {
    m = split(have, kept, " ")
    for (i = 1; i <= m; i++) { name = tolower(kept[i]); gsub(/[-_.]+/, "-", name); keep[name] = 1 }
    n = split(drop, parts, ";")
    for (i = 1; i <= n; i++) {
        eq = index(parts[i], "=")
        if (eq) reason[substr(parts[i], 1, eq - 1)] = substr(parts[i], eq + 1)
    }
    reason["frameworks"] = "installed through HVDBENCH_TORCH_SPEC, HVDBENCH_TF_SPEC and HOROVOD_VERSION"
}
/^# \[[a-z]+\]/ { match($0, /\[[a-z]+\]/); section = substr($0, RSTART + 1, RLENGTH - 2); print; next }
/^[[:space:]]*(#|$)/ { print; next }
{
    name = tolower(substr($0, 1, index($0, "==") - 1)); gsub(/[-_.]+/, "-", name)
    if (section in reason) print "# not applied (" reason[section] "): " $0
    else if (name in keep) print "# not applied (the environment already has " name "): " $0
    else print
}
