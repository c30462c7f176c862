package io.walhook;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

/** The pure parts of the pipeline (DESIGN.md) stay free of frameworks. */
@AnalyzeClasses(packages = "io.walhook", importOptions = ImportOption.DoNotIncludeTests.class)
class ArchitectureTest {

    @ArchTest
    static final ArchRule pgoutputUsesOnlyTheJdk = classes().that().resideInAPackage("io.walhook.pgoutput..")
            .should().onlyDependOnClassesThat().resideInAnyPackage("io.walhook.pgoutput..", "java..")
            .because("the decoder is unit tested with bytes alone and must run anywhere a JDK does");
}
