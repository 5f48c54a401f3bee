import { COMMANDS, GROUPS, optionsOf } from "./spec.ts";

// Shell completion scripts, written from the command table: commands, then
// actions of a group, then the flags of the command on the line.

const topWords = () => [...new Set(COMMANDS.map((c) => c.path[0]!)), "help"].join(" ");
const actionsOf = (group: string) =>
  COMMANDS.filter((c) => c.path[0] === group)
    .map((c) => c.path[1])
    .join(" ");
const flagsOf = (path: string[]) => {
  const spec = COMMANDS.find((c) => c.path.join(" ") === path.join(" "))!;
  return Object.entries(optionsOf(spec))
    .map(([name]) => `--${name}`)
    .join(" ");
};

/** `source <(platform completion bash)`, or save it under bash-completion's completions directory. */
export function bashCompletion(): string {
  const groupCases = GROUPS.map((g) => `    ${g}) actions="${actionsOf(g)}" ;;`).join("\n");
  const flagCases = COMMANDS.map((c) => `    "${c.path.join(" ")}") flags="${flagsOf(c.path)}" ;;`).join("\n");
  const defaults = COMMANDS.filter((c) => c.isDefault)
    .map((c) => `    ${c.path[0]}) key="${c.path.join(" ")}" ;;`)
    .join("\n");
  return `# bash completion for platform (the agent platform's CLI)
_platform() {
  local cur="\${COMP_WORDS[COMP_CWORD]}"
  local cmd="\${COMP_WORDS[1]}"
  local actions="" flags="" key=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "${topWords()} --help --version" -- "$cur") )
    return
  fi
  case "$cmd" in
${groupCases}
  esac
  if [ -n "$actions" ]; then
    if [ "$COMP_CWORD" -eq 2 ] && [[ "$cur" != -* ]]; then
      COMPREPLY=( $(compgen -W "$actions" -- "$cur") )
      return
    fi
    key="$cmd \${COMP_WORDS[2]}"
    if [[ "\${COMP_WORDS[2]}" == -* ]] || [ "$COMP_CWORD" -eq 2 ]; then
      case "$cmd" in
${defaults}
      esac
    fi
  else
    key="$cmd"
  fi
  if [ "$cmd" = completion ]; then
    COMPREPLY=( $(compgen -W "bash zsh" -- "$cur") )
    return
  fi
  case "$key" in
${flagCases}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$flags" -- "$cur") )
  fi
}
complete -o default -F _platform platform
`;
}

/** `source <(platform completion zsh)`, or save it as _platform in a directory of $fpath. */
export function zshCompletion(): string {
  const groupCases = GROUPS.map((g) => `    ${g}) actions=(${actionsOf(g)}) ;;`).join("\n");
  const flagCases = COMMANDS.map((c) => `    "${c.path.join(" ")}") flags=(${flagsOf(c.path)}) ;;`).join("\n");
  const defaults = COMMANDS.filter((c) => c.isDefault)
    .map((c) => `      ${c.path[0]}) key="${c.path.join(" ")}" ;;`)
    .join("\n");
  return `#compdef platform
# zsh completion for platform (the agent platform's CLI)
_platform() {
  local cmd=\${words[2]} key
  local -a actions flags
  if (( CURRENT == 2 )); then
    compadd -- ${topWords()} --help --version
    return
  fi
  case $cmd in
${groupCases}
  esac
  if (( \${#actions} )); then
    if (( CURRENT == 3 )) && [[ \${words[CURRENT]} != -* ]]; then
      compadd -- $actions
      return
    fi
    key="$cmd \${words[3]}"
    if [[ \${words[3]} == -* ]] || (( CURRENT == 3 )); then
      case $cmd in
${defaults}
      esac
    fi
  else
    key=$cmd
  fi
  if [[ $cmd == completion ]]; then
    compadd -- bash zsh
    return
  fi
  case $key in
${flagCases}
  esac
  if [[ \${words[CURRENT]} == -* ]]; then
    compadd -- $flags
  else
    _files
  fi
}
if [[ \${zsh_eval_context[-1]} == loadautofunc ]]; then
  _platform "$@"
else
  compdef _platform platform
fi
`;
}
