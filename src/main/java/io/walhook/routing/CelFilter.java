package io.walhook.routing;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;

import dev.cel.common.CelAbstractSyntaxTree;
import dev.cel.common.CelIssue;
import dev.cel.common.CelOptions;
import dev.cel.common.CelSourceLocation;
import dev.cel.common.CelValidationException;
import dev.cel.common.CelValidationResult;
import dev.cel.common.ast.CelExpr;
import dev.cel.common.types.CelKind;
import dev.cel.common.types.CelType;
import dev.cel.common.types.MapType;
import dev.cel.common.types.NullableType;
import dev.cel.common.types.SimpleType;
import dev.cel.compiler.CelCompiler;
import dev.cel.compiler.CelCompilerFactory;
import dev.cel.parser.CelStandardMacro;
import dev.cel.common.values.CelByteString;
import dev.cel.runtime.CelEvaluationException;
import dev.cel.runtime.CelFunctionBinding;
import dev.cel.runtime.CelRuntime;
import dev.cel.runtime.CelRuntimeFactory;
import dev.cel.runtime.standard.AddOperator.AddOverload;
import io.walhook.change.ChangeEvent;

/**
 * A subscription's row filter: a CEL expression (docs/events.md, "Row filters") compiled once, then
 * evaluated against events. Google's CEL-Java ({@code dev.cel:cel}) parses, type-checks and runs it.
 *
 * <h2>The environment</h2>
 * <ul>
 *   <li>{@code op}: {@code string}; {@code schema}, {@code table}: nullable strings (null for a
 *       logical message, so {@code schema == null} and {@code schema == "public"} both check);
 *   <li>{@code key}, {@code new}, {@code old}: {@code map(string, dyn)}, an absent row being an
 *       empty map; values typed as in the event, see {@link CelVariables};
 *   <li>the standard library and macros ({@code has}, {@code all}, {@code exists},
 *       {@code exists_one}, {@code map}, {@code filter}), no extensions;
 *   <li>heterogeneous numeric comparisons on (compiler and runtime): {@code new.amount > 100} and
 *       {@code new.amount > 100.0} hold whether the column came as an int or a double. Arithmetic
 *       does not mix them: {@code new.amount + 1} fails on a double, {@code double(new.amount) + 1.0}
 *       works on both.
 * </ul>
 *
 * <h2>Compile time</h2>
 * {@link #compile} rejects, with a one-line {@link CelFilterException}: syntax errors (with line
 * and column), type errors the checker can see ({@code op == 1}, unknown variables or functions;
 * not those inside row values, which are {@code dyn}: {@code new.amount + "x"} is found only at run
 * time), a result that can never be a boolean ({@code op}), and expressions over the limits:
 * {@value #MAX_EXPRESSION_LENGTH} characters (code points) and a nesting depth of 250 (CEL's parser
 * default; repeated {@code !} and {@code -} fold and do not count). At run time comprehension
 * macros get {@value #MAX_ITERATIONS} iterations per evaluation, and {@code +} may build at most
 * {@link #MAX_BUILT} characters, bytes or list elements, so no filter can stall the reader or
 * exhaust the heap.
 *
 * <h2>Run time: errors never escape</h2>
 * A filter that fails on an event does not match it: {@link #evaluate} returns
 * {@link Outcome#ERROR} and {@link #matches} false, nothing is thrown into the caller (the
 * replication reader thread). Failures are: a missing key ({@code new.missing > 1}: use
 * {@code has(new.missing)} to test presence), no overload for the values ({@code null > 1},
 * {@code "x" > 1}), division by zero, an overflow, the iteration budget, the concatenation budget, a result that is not a
 * boolean ({@code dyn}), and an event whose JSON cannot be read. Each is counted
 * ({@link #errorCount}) and the latest kept ({@link #lastError}) for the caller to report; this
 * class logs nothing.
 *
 * <h2>Threads</h2>
 * Thread-safe: the compiled program is immutable and the error counters are atomic, so one filter
 * can serve several threads; {@link CelVariables} are per thread.
 *
 * <h2>Native image</h2>
 * Unverified (no GraalVM on the build machines); what is known:
 * <ul>
 *   <li>CEL-Java ships no native-image metadata (no {@code META-INF/native-image} in its six jars)
 *       and does not claim native support. It runs on full {@code protobuf-java} (its AST and type
 *       protos are generated messages), ANTLR 4 and Guava, which work natively.
 *   <li>The path walhook uses (map and primitive variables, no message types declared) builds
 *       protobuf descriptors from generated code and never calls protobuf's reflective accessors.
 *       Reflection in {@code dev.cel} 0.14.0 is confined to the native-types extension (unused) and
 *       to creating protobuf messages by type name ({@code Class.forName} + {@code getDefaultInstance}),
 *       reached only by filters that construct messages such as {@code google.protobuf.Timestamp{...}}.
 *   <li>To register for reflection: {@code com.google.protobuf.ExtensionRegistry}'s static methods
 *       {@code getEmptyRegistry} and {@code newInstance} (protobuf's {@code ExtensionRegistryFactory}
 *       finds them reflectively; without them protobuf 4.x fails in native images with a
 *       {@code MissingReflectionRegistrationError}); for message literals in filters, also the
 *       well-known types' classes ({@code com.google.protobuf.Timestamp}, {@code Duration},
 *       {@code Any}, {@code Struct}, {@code Value}, the wrappers). Initialize CEL at run time (the
 *       default), never at image build time.
 *   <li>Proof needed: a {@code -Pnative} integration test that compiles and evaluates a filter. If
 *       CEL-Java cannot be made to work, projectnessie's {@code cel-java} (another CEL
 *       implementation, with native-image metadata and Quarkus native smoke tests) can replace it
 *       behind this class's API without changing the filter language.
 * </ul>
 */
public final class CelFilter {

    /** Longest expression accepted, in characters (Unicode code points). */
    public static final int MAX_EXPRESSION_LENGTH = 10_000;

    /** Comprehension iterations ({@code all}, {@code exists}, {@code map}...) per evaluation, nested ones summed. */
    public static final int MAX_ITERATIONS = 10_000;

    /** What one evaluation gave. */
    public enum Outcome {
        MATCH, NO_MATCH,
        /** The filter failed on the event: it does not match, see {@link #lastError()}. */
        ERROR
    }

    private static final CelOptions OPTIONS = CelOptions.current()
            .enableHeterogeneousNumericComparisons(true)
            .maxExpressionCodePointSize(MAX_EXPRESSION_LENGTH)
            .comprehensionMaxIterations(MAX_ITERATIONS)
            .build();

    private static final CelType ROW = MapType.create(SimpleType.STRING, SimpleType.DYN);

    private static final CelCompiler COMPILER = CelCompilerFactory.standardCelCompilerBuilder()
            .setOptions(OPTIONS)
            .setStandardMacros(CelStandardMacro.STANDARD_MACROS)
            .addVar("op", SimpleType.STRING)
            .addVar("schema", NullableType.create(SimpleType.STRING))
            .addVar("table", NullableType.create(SimpleType.STRING))
            .addVar("key", ROW)
            .addVar("new", ROW)
            .addVar("old", ROW)
            .build();

    /**
     * Characters, bytes or list elements one evaluation may build with {@code +}, summed: each
     * concatenation costs the length of what it makes. Without a bound, a filter short enough and
     * within the iteration budget ({@code [op].map(x, x + x).map(x, x + x)...}, forty times) doubles
     * a string until the heap is gone, and walhook (which exits on an OutOfMemoryError) is started
     * again into the same change, for good.
     */
    public static final long MAX_BUILT = 4L << 20;

    /** What the evaluation under way on this thread has built with {@code +}; see {@link #MAX_BUILT}. */
    private static final ThreadLocal<long[]> BUILT = ThreadLocal.withInitial(() -> new long[1]);

    private static final CelRuntime RUNTIME = CelRuntimeFactory.standardCelRuntimeBuilder()
            .setOptions(OPTIONS)
            // concatenations of strings, bytes and lists count what they build: see MAX_BUILT
            .setStandardEnvironmentEnabled(false)
            .setStandardFunctions(dev.cel.runtime.CelStandardFunctions.newBuilder()
                    .filterFunctions((function, overload) -> overload != AddOverload.ADD_STRING
                            && overload != AddOverload.ADD_BYTES && overload != AddOverload.ADD_LIST)
                    .build())
            .addFunctionBindings(
                    CelFunctionBinding.from("add_string", String.class, String.class,
                            (a, b) -> a.concat(built(b, (long) a.length() + b.length()))),
                    OPTIONS.evaluateCanonicalTypesToNativeValues()
                            ? CelFunctionBinding.from("add_bytes", CelByteString.class, CelByteString.class,
                                    (a, b) -> a.concat(built(b, (long) a.size() + b.size())))
                            : CelFunctionBinding.from("add_bytes", com.google.protobuf.ByteString.class,
                                    com.google.protobuf.ByteString.class, (a, b) -> a.concat(built(b, (long) a.size() + b.size()))),
                    CelFunctionBinding.from("add_list", List.class, List.class, CelFilter::concat))
            .build();

    private static final String BUILT_TOO_MUCH = "the filter built more than " + MAX_BUILT
            + " characters, bytes or list elements with +";

    /** Counts {@code size} against this evaluation's {@link #MAX_BUILT}; returns {@code value}. */
    private static <T> T built(T value, long size) throws CelEvaluationException {
        long[] built = BUILT.get();
        built[0] += size;
        if (built[0] > MAX_BUILT) {
            throw new CelEvaluationException(BUILT_TOO_MUCH);
        }
        return value;
    }

    /**
     * As CEL's own {@code +} on lists: a {@code map} or {@code filter} macro appends each element to
     * its accumulator, a view it grows in place (only what is added counts, or a macro over 3,000
     * elements would count millions); any other list is copied whole.
     */
    private static List<Object> concat(List<Object> a, List<Object> b) throws CelEvaluationException {
        built(b, a instanceof dev.cel.runtime.ConcatenatedListView ? b.size() : (long) a.size() + b.size());
        return dev.cel.runtime.RuntimeHelpers.concat(a, b);
    }

    /** What a check found, by node id: all that an expression of the same shape takes from it. */
    private record Checked(java.util.Map<Long, dev.cel.common.ast.CelReference> references,
            java.util.Map<Long, CelType> types) {
    }

    /** Checks by shape ({@link #checked}), at most {@link #MAX_SHAPES}, of shapes of at most {@link #MAX_SHAPE_LENGTH} characters. */
    private static final java.util.Map<String, Checked> CHECKED_SHAPES = new java.util.concurrent.ConcurrentHashMap<>();
    private static final int MAX_SHAPES = 1_000;
    private static final int MAX_SHAPE_LENGTH = 2_000;
    private static final AtomicLong TYPE_CHECKS = new AtomicLong();

    /** CEL's overload errors end with a list of candidate signatures in its internal notation. */
    private static final Pattern CANDIDATES = Pattern.compile("\\s*\\(candidates: .*\\)$");
    private static final Pattern SPACES = Pattern.compile("\\s+");

    private final String expression;
    private final CelRuntime.Program program;
    private final FilterTerms terms;
    private final AtomicLong errors = new AtomicLong();
    private volatile String lastError;

    private CelFilter(String expression, CelRuntime.Program program, FilterTerms terms) {
        this.expression = expression;
        this.program = program;
        this.terms = terms;
    }

    /**
     * Parses, type-checks and plans an expression.
     *
     * @throws CelFilterException naming the problem in one line, with the position when CEL has one
     */
    public static CelFilter compile(String expression) {
        if (expression == null || expression.isBlank()) {
            throw new CelFilterException("filter: the expression is empty");
        }
        int length = expression.codePointCount(0, expression.length());
        if (length > MAX_EXPRESSION_LENGTH) {
            throw new CelFilterException("filter: the expression is " + length + " characters long, at most "
                    + MAX_EXPRESSION_LENGTH + " are allowed");
        }
        try {
            CelValidationResult parsed = COMPILER.parse(expression);
            if (parsed.hasError()) {
                throw problem("syntax error", parsed.getErrors());
            }
            CelAbstractSyntaxTree ast = checked(parsed.getAst());
            CelType result = ast.getResultType();
            if (result.kind() != CelKind.BOOL && result.kind() != CelKind.DYN) {
                throw new CelFilterException("filter must be a boolean expression, is " + result.name());
            }
            return new CelFilter(expression, RUNTIME.createProgram(ast), FilterTerms.of(ast.getExpr()));
        } catch (CelValidationException | CelEvaluationException e) {
            // not reached: getAst() throws only when hasError(), and planning a checked AST does not fail
            throw new CelFilterException("filter: " + oneLine(e.getMessage()));
        }
    }

    /**
     * The parsed expression type-checked, by CEL's checker or from the check of an earlier one of
     * the same shape: the same tree, identifiers, functions and node ids, its constants of the same
     * kinds but other values ({@code new.tenant_id == 42} and {@code == 43}). CEL's checker builds
     * its whole standard environment at every check, nine tenths of a filter's compilation: 10,000
     * tenant filters took seconds at start-up. Types depend on constants' kinds, not their values,
     * in this environment: no optional syntax (whose {@code _?._} reads a string constant as a field
     * name), no declared constants, no container; a shape whose check rewrote the tree is not reused.
     */
    private static CelAbstractSyntaxTree checked(CelAbstractSyntaxTree parsed) throws CelValidationException {
        String shape = shape(parsed.getExpr(), new StringBuilder()).toString();
        // a long expression is rarely shared, and its shape would hold memory for nothing
        boolean reusable = shape.indexOf(UNSHAPED) < 0 && shape.length() <= MAX_SHAPE_LENGTH;
        Checked same = reusable ? CHECKED_SHAPES.get(shape) : null;
        if (same != null) {
            return CelAbstractSyntaxTree.newCheckedAst(parsed.getExpr(), parsed.getSource(), same.references(),
                    same.types());
        }
        TYPE_CHECKS.incrementAndGet();
        CelValidationResult checked = COMPILER.check(parsed);
        if (checked.hasError()) {
            throw problem("type error", checked.getErrors());
        }
        CelAbstractSyntaxTree ast = checked.getAst();
        if (reusable && ast.getExpr().equals(parsed.getExpr())) {
            if (CHECKED_SHAPES.size() >= MAX_SHAPES) {
                CHECKED_SHAPES.clear(); // filters of that many shapes gain little from it
            }
            CHECKED_SHAPES.put(shape, new Checked(ast.getReferenceMap(), ast.getTypeMap()));
        }
        return ast;
    }

    /** The expression's shape: everything but its constants' values ({@link #checked}). */
    private static StringBuilder shape(CelExpr expr, StringBuilder out) {
        out.append('#').append(expr.id());
        switch (expr.getKind()) {
            case CONSTANT -> out.append("c:").append(expr.constant().getKind());
            case IDENT -> name(out.append("i:"), expr.ident().name());
            case SELECT -> {
                name(out.append("s:"), expr.select().field()).append(expr.select().testOnly() ? "?(" : "(");
                shape(expr.select().operand(), out).append(')');
            }
            case CALL -> {
                name(out.append("f:"), expr.call().function()).append('(');
                if (expr.call().target().isPresent()) {
                    shape(expr.call().target().get(), out).append(';');
                }
                for (CelExpr arg : expr.call().args()) {
                    shape(arg, out).append(',');
                }
                out.append(')');
            }
            case LIST -> {
                out.append("l:").append(expr.list().optionalIndices()).append('[');
                for (CelExpr element : expr.list().elements()) {
                    shape(element, out).append(',');
                }
                out.append(']');
            }
            case MAP -> {
                out.append("m:{");
                for (CelExpr.CelMap.Entry entry : expr.map().entries()) {
                    out.append('#').append(entry.id()).append(entry.optionalEntry() ? "?" : "");
                    shape(entry.key(), out).append(':');
                    shape(entry.value(), out).append(',');
                }
                out.append('}');
            }
            case STRUCT -> {
                name(out.append("o:"), expr.struct().messageName()).append('{');
                for (CelExpr.CelStruct.Entry entry : expr.struct().entries()) {
                    name(out.append('#').append(entry.id()).append(entry.optionalEntry() ? "?" : ""), entry.fieldKey());
                    shape(entry.value(), out).append(',');
                }
                out.append('}');
            }
            case COMPREHENSION -> {
                CelExpr.CelComprehension c = expr.comprehension();
                name(name(name(out.append("x:"), c.iterVar()), c.iterVar2()), c.accuVar()).append('(');
                for (CelExpr part : List.of(c.iterRange(), c.accuInit(), c.loopCondition(), c.loopStep(), c.result())) {
                    shape(part, out).append(';');
                }
                out.append(')');
            }
            default -> out.append(UNSHAPED);
        }
        return out;
    }

    /** Marks an expression {@link #shape} cannot describe: its check is not reused. */
    private static final char UNSHAPED = '\u0000';

    /** A name, its length first: no two different sequences of names read the same. */
    private static StringBuilder name(StringBuilder out, String name) {
        return out.append(name.length()).append(':').append(name);
    }

    /** Type checks CEL's checker made (the others came from {@link #checked}'s shapes), for tests. */
    static long typeChecks() {
        return TYPE_CHECKS.get();
    }

    /** The expression as given. */
    public String expression() {
        return expression;
    }

    /** What the expression requires that the router can look up instead of evaluating. */
    FilterTerms terms() {
        return terms;
    }

    /** Whether the event matches; false when the filter fails on it (see {@link #evaluate}). */
    public boolean matches(ChangeEvent event) {
        return evaluate(CelVariables.of(event)) == Outcome.MATCH;
    }

    /** Whether the variables match; false when the filter fails on them (see {@link #evaluate}). */
    public boolean matches(CelVariables variables) {
        return evaluate(variables) == Outcome.MATCH;
    }

    /**
     * Evaluates the filter. Never throws for anything the event or the expression does: a failure
     * is {@link Outcome#ERROR}, counted and kept as {@link #lastError()}.
     */
    public Outcome evaluate(CelVariables variables) {
        Object result;
        BUILT.get()[0] = 0;
        try {
            result = program.eval(name -> Optional.ofNullable(variables.find(name)));
        } catch (CelEvaluationException e) {
            return failed(variables, described(e));
        } catch (RuntimeException e) {
            // the rows could not be built (unreadable JSON), or CEL itself broke on odd input
            return failed(variables, oneLine(String.valueOf(e.getMessage())));
        }
        if (result instanceof Boolean matched) {
            return matched ? Outcome.MATCH : Outcome.NO_MATCH;
        }
        return failed(variables, "the result is " + describe(result) + ", not a boolean");
    }

    /** How many evaluations failed since compilation. */
    public long errorCount() {
        return errors.get();
    }

    /**
     * The latest failure, one line: {@code filter failed on event <id>: <CEL's message>} (no id
     * when the variables came from no event); null when none failed.
     */
    public String lastError() {
        return lastError;
    }

    @Override
    public String toString() {
        return "CelFilter[" + expression + "]";
    }

    /**
     * Whether a failure just counted is to be logged: the first, then at most one a minute (an
     * expression failing on every event of a busy table would fill the log otherwise).
     */
    public boolean reportNow() {
        long now = System.nanoTime();
        long last = reported.get();
        return (last == NEVER || now - last >= REPORT_EVERY_NANOS) && reported.compareAndSet(last, now);
    }

    private static final long NEVER = Long.MIN_VALUE;
    private static final long REPORT_EVERY_NANOS = java.util.concurrent.TimeUnit.MINUTES.toNanos(1);
    private final AtomicLong reported = new AtomicLong(NEVER);

    private Outcome failed(CelVariables variables, String detail) {
        errors.incrementAndGet();
        String id = variables.eventId();
        lastError = "filter failed" + (id == null ? "" : " on event " + id) + ": " + detail;
        return Outcome.ERROR;
    }

    private static String describe(Object value) {
        if (value == null) {
            return "null";
        }
        String type = value.getClass().getSimpleName();
        return type.isEmpty() ? value.getClass().getName() : type;
    }

    /** {@code filter: syntax error at 1:5: mismatched input ...}; further errors counted, not listed. */
    private static CelFilterException problem(String kind, List<CelIssue> issues) {
        if (issues.isEmpty()) {
            return new CelFilterException("filter: " + kind);
        }
        CelIssue first = issues.get(0);
        CelSourceLocation at = first.getSourceLocation();
        boolean located = at.getLine() > 0 && at.getColumn() >= 0;
        int line = located ? at.getLine() : -1;
        int column = located ? at.getColumn() + 1 : -1;
        StringBuilder message = new StringBuilder("filter: ").append(kind);
        if (located) {
            message.append(" at ").append(line).append(':').append(column);
        }
        message.append(": ").append(CANDIDATES.matcher(oneLine(first.getMessage())).replaceFirst(""));
        if (issues.size() > 1) {
            message.append(" (and ").append(issues.size() - 1).append(issues.size() == 2 ? " more error)"
                    : " more errors)");
        }
        return new CelFilterException(message.toString(), line, column);
    }

    /**
     * CEL's message on one line, without the values it quotes (a function failing on a row's value
     * names its arguments: an SSN that {@code int()} could not read would be shown in /status to
     * every holder of the read token), and at most {@value #DETAIL_LENGTH} characters.
     */
    private static String oneLine(String text) {
        String line = SPACES.matcher(text).replaceAll(" ").trim();
        line = ARGUMENTS.matcher(line).replaceAll("$1 on its argument$2");
        line = QUOTED_VALUE.matcher(line).replaceAll("(a value)"); // Java's own: For input string: "..."
        return line.length() <= DETAIL_LENGTH ? line : line.substring(0, DETAIL_LENGTH - 3) + "...";
    }

    /**
     * What CEL said, without the row's values it may quote: a missing key is named only when the
     * expression names it (not {@code {"a": 1}[new.ssn]}'s), and a value that could not be read
     * (a bad format, an overflow, an invalid argument, an index) is described, not quoted. No
     * overload, a division by zero and the budgets quote nothing of the row.
     */
    private String described(CelEvaluationException e) {
        String message = oneLine(String.valueOf(e.getMessage()));
        dev.cel.common.CelErrorCode code = e.getErrorCode();
        if (message.contains(BUILT_TOO_MUCH) || code == null) {
            return message;
        }
        java.util.regex.Matcher at = LOCATION.matcher(message);
        String location = at.find() ? at.group() + ": " : "";
        for (Throwable cause = e.getCause(); cause != null && cause != cause.getCause(); cause = cause.getCause()) {
            if (cause instanceof java.io.UncheckedIOException unread && String.valueOf(unread.getMessage()).startsWith("cannot read the event's")) {
                return location + oneLine(unread.getMessage()); // the variables' own words (CelVariables): no value
            }
        }
        return switch (code) {
            case OVERLOAD_NOT_FOUND, AMBIGUOUS_OVERLOAD, DIVIDE_BY_ZERO, ITERATION_BUDGET_EXCEEDED, TYPE_NOT_FOUND -> message;
            case ATTRIBUTE_NOT_FOUND -> namesOnlyTheExpressions(message) ? message
                    : location + "a key not present in the map (the key, a value, is not shown)";
            case BAD_FORMAT -> location + "a value could not be read as the type asked for (not shown)";
            case NUMERIC_OVERFLOW -> location + "a number out of range (not shown)";
            case INDEX_OUT_OF_BOUNDS -> location + "an index out of bounds (not shown)";
            default -> location + "failed (" + code.name().toLowerCase(java.util.Locale.ROOT).replace('_', ' ')
                    + "; the message, which may quote a value, is not shown)";
        };
    }

    /** Whether every quoted name of a message is one the expression itself holds. */
    private boolean namesOnlyTheExpressions(String message) {
        java.util.regex.Matcher quoted = SINGLE_QUOTED.matcher(message);
        boolean any = false;
        while (quoted.find()) {
            any = true;
            if (!expression.contains(quoted.group(1))) {
                return false;
            }
        }
        return any;
    }

    private static final Pattern LOCATION = Pattern.compile("^evaluation error at [^:]+:\\d+");
    private static final Pattern SINGLE_QUOTED = Pattern.compile("'([^']*)'");
    private static final Pattern ARGUMENTS = Pattern.compile("(failed) with arg(\\(s\\))? '.*'", Pattern.DOTALL);
    private static final Pattern QUOTED_VALUE = Pattern.compile("\"[^\"]*\"?");
    private static final int DETAIL_LENGTH = 500;
}
