# Shared by scripts/quickstart, scripts/bench and scripts/bench-decoder (sourced, not run; the caller has cd'ed to the
# repository root): builds walhook and the test-scope launchers when anything changed.
# shellcheck shell=bash

jar=target/quarkus-app/quarkus-run.jar
classpath_file=target/quickstart.classpath
# when the scripts last built: the jar itself is never touched, since its AppCDS archive
# (app-cds.jsa) is valid only for the jar as the package step left it
stamp=target/scripts-built.stamp

# stale LAUNCHER_CLASS: rebuild when an artifact is missing, or any source, resource or the pom
# is newer than what was built.
stale() {
  local launcher=$1
  [ ! -f "$jar" ] || [ ! -f "$launcher" ] || [ ! -f "$classpath_file" ] || [ ! -f "$stamp" ] && return 0
  [ pom.xml -nt "$classpath_file" ] && return 0
  [ "$jar" -nt "$stamp" ] && return 0
  [ -n "$(find pom.xml openapi.yaml src -newer "$stamp" -type f -print -quit)" ]
}

# build_if_stale TAG LAUNCHER_CLASS: the packaged jar, the test classes and the test classpath.
build_if_stale() {
  local tag=$1 launcher=$2
  if stale "$launcher"; then
    echo "[$tag] building walhook (first run downloads dependencies; later runs are quick) ..."
    ./mvnw -B -q -DskipTests package
    ./mvnw -B -q dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile="$classpath_file"
    touch "$stamp"
  fi
}
