package io.walhook.change;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.Test;

/** The value conversion layer is pure: unit tested with bytes alone, usable from any thread model. */
class ValueConvertersPurityTest {

    @Test
    void valueConversionDependsOnlyOnTheJdkAndTheDecoder() {
        JavaClasses classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
                .importPackages("io.walhook.change");
        classes().that().haveSimpleNameStartingWith("ValueConverter")
                .or().haveSimpleNameStartingWith("ValueKind")
                .or().haveSimpleNameStartingWith("BuiltinTypes")
                .or().haveSimpleNameStartingWith("PgArrayParser")
                .or().haveSimpleNameStartingWith("PgDateTimes")
                .or().haveSimpleNameStartingWith("Utf8")
                .or().haveSimpleNameStartingWith("JsonWriter")
                .or().haveSimpleNameStartingWith("EventJsonWriter")
                .or().haveSimpleNameStartingWith("RelationInfo")
                .or().haveSimpleNameStartingWith("ConverterBuffers")
                .and().haveSimpleNameNotEndingWith("Test")
                .should().onlyDependOnClassesThat().resideInAnyPackage("java..", "io.walhook.pgoutput..",
                        "io.walhook.change..")
                .because("value conversion runs on the reader thread's hot path and is tested without a server;"
                        + " Quarkus, Vert.x, Jakarta and JSON libraries stay out of it (events are written by JsonWriter)")
                .check(classes);
    }
}
