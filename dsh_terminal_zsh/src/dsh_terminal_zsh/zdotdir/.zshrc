# dsh-terminal's prompt protocol for zsh (ZDOTDIR points here; see dsh_terminal_zsh.environment).
# The user's own rc files are not read: ZDOTDIR replaces ~ for them, and the session's
# zsh starts with --no-globalrcs.
unsetopt PROMPT_CR PROMPT_SP BEEP
# Job notices only before a prompt, as in bash: with NOTIFY zsh prints one while idle and
# redraws the prompt, marker and all, with the status of the command before.
unsetopt NOTIFY
PROMPT_EOL_MARK=''
PS1=$DSH_ZSH_PS1 PS2=$DSH_ZSH_PS2 RPS1='' RPS2=''
# Re-asserted before every prompt, so a PS1=... of a command never survives to the next.
__dsh_precmd() { PS1=$DSH_ZSH_PS1 PS2=$DSH_ZSH_PS2 RPS1='' RPS2='' }
precmd_functions=(${precmd_functions:#__dsh_precmd} __dsh_precmd)
# An interrupted line of builtins leaves 130, as in bash (zsh alone would leave the status
# of the command before it).
TRAPINT() { return $(( 128 + $1 )) }
# An exit the shell takes itself prints its status (told apart from a death by a signal).
# Only the shell itself: a subshell ( ... ) runs zshexit too, and its status is not the shell's.
__dsh_exit() { local code=$?; (( ZSH_SUBSHELL )) || print -rn -- $'\e]133;E;'$code$'\a' }
zshexit_functions=(${zshexit_functions:#__dsh_exit} __dsh_exit)
# environment = "login" (dsh_terminal_bash.login): the functions and aliases a zsh login
# shell ended with ride in DSH_LOGIN_DEFINITIONS_0, _1, ...; replayed last, so the
# protocol above is already parsed, and the variables removed, so nothing the session runs
# inherits them.
if (( ${+DSH_LOGIN_DEFINITIONS_0} )); then
    __dsh_n=0 __dsh_definitions=
    while __dsh_name=DSH_LOGIN_DEFINITIONS_$__dsh_n; (( ${(P)+__dsh_name} )); do
        __dsh_definitions+=${(P)__dsh_name}
        unset $__dsh_name
        (( __dsh_n++ ))
    done
    eval "$__dsh_definitions"
    \builtin unset __dsh_n __dsh_definitions __dsh_name
fi
