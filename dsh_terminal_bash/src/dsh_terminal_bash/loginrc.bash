# The rc file of a bash session started with environment = "login" (dsh_terminal_bash.login).
# It replays the functions and aliases the user's login shell ended with, which the
# session's environment carries in DSH_LOGIN_DEFINITIONS_0, _1, ... (one variable holds at
# most what the kernel lets one hold), and removes those variables, so nothing the session
# runs inherits them. extglob is on while they are read: a function written with it parses.
__dsh_n=0
__dsh_definitions=
while __dsh_name=DSH_LOGIN_DEFINITIONS_$__dsh_n; [ -n "${!__dsh_name+set}" ]; do
    __dsh_definitions+=${!__dsh_name}
    unset "$__dsh_name"
    __dsh_n=$((__dsh_n + 1))
done
if shopt -q extglob; then __dsh_extglob=1; else __dsh_extglob=; shopt -s extglob; fi
eval "$__dsh_definitions"
# What the replay defined may shadow any command: builtins only from here on.
[ -n "$__dsh_extglob" ] || \builtin shopt -u extglob
\builtin unset __dsh_n __dsh_definitions __dsh_name __dsh_extglob
