package io.walhook;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

/**
 * The pure parts of the pipeline (the README's picture, docs/protocol.md section 6) stay free of
 * frameworks, no package depends on itself through others, and the packages follow the data:
 * reading and delivering meet only in the package that wires them.
 */
@AnalyzeClasses(packages = "io.walhook", importOptions = ImportOption.DoNotIncludeTests.class)
class ArchitectureTest {

    @ArchTest
    static final ArchRule pgoutputUsesOnlyTheJdk = classes().that().resideInAPackage("io.walhook.pgoutput..")
            .should().onlyDependOnClassesThat().resideInAnyPackage("io.walhook.pgoutput..", "java..")
            .because("the decoder is unit tested with bytes alone and must run anywhere a JDK does");

    @ArchTest
    static final ArchRule packagesAreFreeOfCycles = com.tngtech.archunit.library.dependencies.SlicesRuleDefinition
            .slices().matching("io.walhook.(*)..").should().beFreeOfCycles()
            .because("a package read in the order of the data (pgoutput, change, routing, delivery) can be"
                    + " understood, tested and changed without the ones that come after it");

    @ArchTest
    static final ArchRule pipelineCoreUsesNoFramework = com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses()
            .that().resideInAnyPackage("io.walhook.pgoutput..", "io.walhook.change..")
            .or().haveFullyQualifiedName("io.walhook.checkpoint.AckTracker")
            .should().dependOnClassesThat().resideInAnyPackage("io.quarkus..", "io.vertx..", "jakarta..", "io.smallrye..")
            .because("decoding, transaction assembly, values and the acknowledgement watermark are unit tested"
                    + " with bytes and values alone (docs/testing.md)");

    @ArchTest
    static final ArchRule readingKnowsNothingOfDelivery = com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses()
            .that().resideInAPackage("io.walhook.source..")
            .should().dependOnClassesThat().resideInAnyPackage("io.walhook.delivery..", "io.walhook.backfill..",
                    "io.walhook.pipeline..", "io.walhook.api..")
            .because("the reader hands transactions over through checkpoint's queue and learns what is done from its"
                    + " tracker; what comes after it is wired by the pipeline package");

    @ArchTest
    static final ArchRule deliveryKnowsNothingOfReading = com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses()
            .that().resideInAPackage("io.walhook.delivery..")
            .should().dependOnClassesThat().resideInAnyPackage("io.walhook.source..", "io.walhook.backfill..",
                    "io.walhook.pipeline..", "io.walhook.api..")
            .because("delivery takes events and settles them; where they come from is the pipeline's business");

    @ArchTest
    static final ArchRule onlyTheApiUsesThePipeline = classes().that().resideInAPackage("io.walhook.pipeline..")
            .should().onlyHaveDependentClassesThat().resideInAnyPackage("io.walhook.pipeline..", "io.walhook.api..")
            .because("the pipeline package wires the others and owns start-up and shutdown: nothing below it may"
                    + " reach back up");
}
