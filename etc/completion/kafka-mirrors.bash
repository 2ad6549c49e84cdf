# bash completion for kafka-mirrors and kafka-mirrors.sh (its KIP-1279
# name), installed as bash-completion/completions/kafka-mirrors (and a link
# named kafka-mirrors.sh) so that bash-completion loads it on first use.
#
# Options and their arguments complete from the program's own list; mirror
# names (--mirror), topic names (--topic: the mirror's with --mirror
# given, every mirror's with --describe) and a mirror's config keys
# (--delete-config, with --mirror given) are asked of mirrord itself, at
# the line's --bootstrap-server or the program's default, with
# --command-config if given, and at most 3 seconds spent waiting.

# The words before the cursor, split on blanks only (bash's own
# COMP_WORDS also splits host:port at the colon).
_kafka_mirrors_words()
{
	local line=${COMP_LINE:0:COMP_POINT}
	read -ra _km_words <<<"$line"
	[[ $line == *[[:blank:]] || ${#_km_words[@]} -eq 0 ]] && _km_words+=("")
}

# The value given to option $1 on the line, if any.
_kafka_mirrors_arg()
{
	local i n=$((${#_km_words[@]} - 1))
	for ((i = 1; i < n; i++)); do
		if [[ ${_km_words[i]} == "$1" ]]; then
			printf '%s\n' "${_km_words[i + 1]}"
			return 0
		fi
	done
	return 1
}

# Runs the CLI on the line's --bootstrap-server (else its default) and
# --command-config.
_kafka_mirrors_query()
{
	local bootstrap config
	local -a cmd=("${_km_words[0]}")
	bootstrap=$(_kafka_mirrors_arg --bootstrap-server) &&
	    cmd+=(--bootstrap-server "$bootstrap")
	config=$(_kafka_mirrors_arg --command-config) &&
	    cmd+=(--command-config "$config")
	timeout 3 "${cmd[@]}" "$@" 2>/dev/null
}

_kafka_mirrors()
{
	local -a _km_words
	local cur prev
	_kafka_mirrors_words
	cur=${_km_words[-1]}
	prev=
	((${#_km_words[@]} > 1)) && prev=${_km_words[-2]}
	COMPREPLY=()

	case $prev in
	--command-config | --mirror-config)
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	--mirror)
		# The first column of --list, header and "No mirrors found" aside.
		local names
		names=$(_kafka_mirrors_query --list |
		    awk 'NR > 1 && NF >= 4 { print $1 }')
		COMPREPLY=($(compgen -W "$names" -- "$cur"))
		return
		;;
	--topic | --topics | --exclude)
		local describe= names w
		local -a mirror=()
		# --add names source topics, which only mirrord's source knows.
		for w in "${_km_words[@]}"; do
			[[ $w == --add || $w == --start ]] && return 0
			[[ $w == --describe ]] && describe=1
		done
		# The mirror's topics; with --describe, every mirror's.
		if w=$(_kafka_mirrors_arg --mirror); then
			mirror=(--mirror "$w")
		elif [[ -z $describe ]]; then
			return 0
		fi
		names=$(_kafka_mirrors_query --describe --summary "${mirror[@]}" |
		    awk 'NR > 1 && NF >= 6 { print $2 }' | sort -u)
		COMPREPLY=($(compgen -W "$names" -- "$cur"))
		return
		;;
	--resolution)
		COMPREPLY=($(compgen -W "skip-over preserve" -- "$cur"))
		return
		;;
	--delete-config)
		# The keys the mirror has (--describe --config lists "  key=value").
		local mirror names
		mirror=$(_kafka_mirrors_arg --mirror) || return 0
		names=$(_kafka_mirrors_query --describe --config --mirror "$mirror" |
		    awk '/^  [^ ]+=/ { sub(/^  /, ""); sub(/=.*/, ""); print }')
		COMPREPLY=($(compgen -W "$names" -- "$cur"))
		return
		;;
	--bootstrap-server | --add-config)
		return
		;;
	esac

	local opts
	opts="--bootstrap-server --command-config --mirror-config --mirror
	    --topic --topics --exclude --json --summary --failed --wait --resolution
	    --create --add --start --remove --stop --pause --resume --recover
	    --delete --list --describe --alter --config --add-config
	    --delete-config --help --version"
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}

complete -F _kafka_mirrors kafka-mirrors kafka-mirrors.sh
